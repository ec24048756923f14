"""Lighthouse (pinned in tools/lighthouse, `make install-lighthouse`) auditing a page open in the tests' Chromium."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Playwright, expect

from tests.support.browser import ANSWERS, ARGS, CHROMIUM
from tests.support.servers import LOGS, ROOT, free_port

LIGHTHOUSE_DIR = ROOT / "tools" / "lighthouse" / "node_modules"
LIGHTHOUSE = LIGHTHOUSE_DIR / ".bin" / "lighthouse"


@contextlib.contextmanager
def debugged_chromium(playwright: Playwright, profile: Path) -> Iterator[tuple[BrowserContext, int]]:
    """Chromium with a profile of its own and a debugging port, which Lighthouse drives where a page logged in."""
    port = free_port()
    args = [*ARGS, f"--remote-debugging-port={port}"]
    context = playwright.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=args)
    try:
        yield context, port
    finally:
        context.close()


def audit(url: str, port: int, name: str) -> dict[str, Any]:
    """Lighthouse's report (accessibility, best practices) on url, in the Chromium debugging on port."""
    if not LIGHTHOUSE.exists():
        pytest.fail("Lighthouse is missing: `make install-lighthouse` (part of `make test`) installs it")
    report = LOGS / f"{name}.json"
    LOGS.mkdir(parents=True, exist_ok=True)
    command = [str(LIGHTHOUSE), url, f"--port={port}", "--only-categories=accessibility,best-practices"]
    run = subprocess.run(
        [*command, "--output=json", f"--output-path={report}", "--quiet"],
        env={**os.environ, "CHROME_PATH": CHROMIUM},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, f"Lighthouse failed: {run.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(Path(report).read_text())
    assert result["finalDisplayedUrl"] == url, f"Lighthouse audited another page than {url}"
    return result


def failing(report: dict[str, Any], category: str) -> list[str]:
    """A category's audits that count and did not pass, with the elements they name."""
    lines = []
    for ref in report["categories"][category]["auditRefs"]:
        audit_result = report["audits"][ref["id"]]
        if ref["weight"] and audit_result["score"] is not None and audit_result["score"] < 1:
            items = (audit_result.get("details") or {}).get("items", [])
            nodes = [item.get("node", {}).get("selector", "") for item in items]
            lines.append(f"{ref['id']} ({audit_result['title']}): {nodes}")
    return lines


def accessible_once_logged_in(playwright: Playwright, app_url: str, path: str, user: str, profile: Path) -> None:
    """A team member (password `<user>-password`) logs in; the app's page at path scores ≥ 0.98 for accessibility."""
    name = f"lighthouse-{path.strip('/')}"
    with debugged_chromium(playwright, profile) as (context, port):
        page = context.new_page()
        page.goto(app_url)
        page.fill("#email", user)
        page.fill("#password", f"{user}-password")
        page.click("button[type=submit]")
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        page.close()
        report = audit(app_url + path, port, name)
    score = report["categories"]["accessibility"]["score"]
    assert score >= 0.98, f"accessibility {score}: " + "; ".join(failing(report, "accessibility"))
