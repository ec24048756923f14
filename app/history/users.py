"""`python -m app.history.users add|remove|list [NAME]`: the people who may log in to the chat."""

from __future__ import annotations

import argparse
import getpass
import sys

from app.config import Settings, get_settings, load_or_explain
from app.history.accounts import MIN_PASSWORD_CHARS, list_users, remove_user, set_password
from app.history.database import create_engine, database_url, upgrade
from app.identity.claims import password_name


def read_password(name: str) -> str:
    """Asked twice on a terminal; the first line of standard input otherwise (scripts)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    password = getpass.getpass(f"Password for {name}: ")
    if getpass.getpass("Again: ") != password:
        raise SystemExit("make user-add: the two passwords differ; nothing changed.")
    return password


def run(settings: Settings, command: str, name: str, *, admin: bool = False) -> str:
    """Do the command; the line to print."""
    if command == "add" and (refusal := password_name(name)):
        raise SystemExit(f"make user-add: {refusal.reason}; nothing changed.")
    engine = create_engine(database_url(settings.database_url, settings.data_dir))
    try:
        upgrade(engine)
        if command == "list":
            return "\n".join(list_users(engine)) or "No users: the chat runs for the local user only (loopback)."
        if command == "remove":
            if remove_user(engine, name):
                return f"Removed {name} and their chats."
            return f"No user {name}."
        password = read_password(name)
        if len(password) < MIN_PASSWORD_CHARS:
            raise SystemExit(f"make user-add: a password needs at least {MIN_PASSWORD_CHARS} characters.")
        added = set_password(engine, name, password, admin=admin)
        restart = " Restart the chat if it runs without login (the local user) to require it." if added else ""
        done = f"Added {name}" if added else f"New password set for {name}"
        return done + (", an admin." if admin else ".") + restart
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m app.history.users", description=__doc__)
    parser.add_argument("command", choices=["add", "remove", "list"])
    parser.add_argument("name", nargs="?", default="")
    parser.add_argument("--admin", action="store_true", help="add: the user is an admin (the admin page)")
    args = parser.parse_args()
    if args.command != "list" and not args.name.strip():
        parser.error(f"{args.command} needs a NAME")
    settings = load_or_explain(get_settings, f"make user-{args.command}")
    if settings is None:
        return 2
    print(run(settings, args.command, args.name.strip(), admin=args.admin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
