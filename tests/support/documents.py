"""Documents too long for the window, made by the tests: an English manual as a PDF, a Chinese one as text."""

from __future__ import annotations

import random
from collections.abc import Mapping

from tests.support.pdfs import paged_pdf

# The sentences that hold the answers, and the questions that ask for them.
ENGLISH_NEEDLE = "The spare impeller for the pump has the part number ZX-4471 and ships within two weeks."
ENGLISH_QUESTION = "What is the part number of the spare impeller?"
# A follow-up that names nothing of its own: only the question before it finds its passage.
FOLLOW_UP = "And where do I get it?"
CHINESE_NEEDLE = "水泵的保修期为五年，从购买之日起计算，保修卡请妥善保存。"
CHINESE_QUESTION = "水泵的保修期是多久？"
NEEDLE_PAGE = 17
# Parts no filler line names, one a needle, for questions about several pages of one manual (the first: the
# impeller's). The question's keywords are the part's name and "spare part number", which only needles hold.
PARTS = (
    "impeller",
    "thermostat",
    "compressor",
    "solenoid",
    "diaphragm",
    "manifold",
    "capacitor",
    "bellows",
    "flywheel",
    "gearbox",
    "piston",
    "bearing",
)
NEEDLES = tuple(
    (
        f"The spare {part} for the pump has the part number ZX-{4471 + 113 * index} and ships within two weeks.",
        f"What is the part number of the spare {part}?",
    )
    for index, part in enumerate(PARTS)
)

WORDS = [
    "valve",
    "hose",
    "tank",
    "filter",
    "motor",
    "cable",
    "switch",
    "panel",
    "bracket",
    "screw",
    "seal",
    "gasket",
    "lever",
    "gauge",
    "timer",
    "sensor",
    "washer",
    "nozzle",
    "clamp",
    "fitting",
    "housing",
    "cover",
    "frame",
    "rail",
    "hinge",
    "latch",
    "knob",
    "dial",
    "light",
    "fuse",
    "plug",
    "socket",
]
VERBS = "check clean tighten inspect adjust replace mount remove align secure lubricate test".split()  # noqa: SIM905
CHINESE_FILLER = (
    "使用前请阅读全部说明。",
    "定期检查电源线是否破损。",
    "设备应放置在通风良好的地方。",
    "清洁外壳时请使用干布。",
    "如发现异常声音，应立即关闭电源。",
    "安装时请确保底座水平稳固。",
    "长时间不用时，请拔下电源插头。",
    "儿童不得操作本设备。",
)


def english_manual(pages: int = 30, lines_per_page: int = 40, needles: Mapping[int, str] | None = None) -> bytes:
    """A manual of many pages of maintenance lines; the needle alone on NEEDLE_PAGE, or each needle on its page."""
    return paged_pdf(english_pages(pages, lines_per_page, needles or {NEEDLE_PAGE: ENGLISH_NEEDLE}))


def english_pages(pages: int, lines_per_page: int, needles: Mapping[int, str]) -> list[list[str]]:
    """The manual's lines, page by page (from 1), each needle in the middle of its page."""
    chooser = random.Random(7)
    book = []
    for number in range(1, pages + 1):
        lines = [f"Chapter {number}"]
        for _ in range(lines_per_page):
            a, b = chooser.sample(WORDS, 2)
            lines.append(
                f"{chooser.choice(VERBS).capitalize()} the {a} near the {b} every {chooser.randint(2, 9)} days."
            )
        if number in needles:
            lines.insert(lines_per_page // 2, needles[number])
        book.append(lines)
    return book


def chinese_manual(paragraphs: int = 400) -> bytes:
    """A Chinese manual of many short paragraphs; the needle in the middle."""
    chooser = random.Random(11)
    body = ["".join(chooser.choices(CHINESE_FILLER, k=4)) for _ in range(paragraphs)]
    body.insert(paragraphs // 2, CHINESE_NEEDLE)
    return ("# 使用说明\n\n" + "\n\n".join(body)).encode()
