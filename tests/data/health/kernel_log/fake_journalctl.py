"""Stand-in for `journalctl -k -o json --no-pager (-b [-n 1] | --after-cursor C)` over a JSONL journal file.

Usage: fake_journalctl.py JOURNAL.jsonl [journalctl arguments]. It refuses arguments the real
reader never sends, so a change in the argument list shows up as a failing test.
"""

import sys

journal, args = sys.argv[1], sys.argv[2:]
if args[:4] != ["-k", "-o", "json", "--no-pager"]:
    sys.exit(f"unexpected arguments: {args}")
rest = args[4:]
with open(journal, encoding="utf-8") as handle:
    entries = [line for line in handle.read().splitlines() if line.strip()]
if rest == ["-b"]:
    start = 0
elif rest == ["-b", "-n", "1"]:
    start = max(len(entries) - 1, 0)
elif len(rest) == 2 and rest[0] == "--after-cursor":
    marker = '"__CURSOR": "' + rest[1] + '"'
    matches = [i for i, line in enumerate(entries) if marker in line]
    if not matches:
        sys.exit("Failed to seek to cursor: Invalid argument")
    start = matches[0] + 1
else:
    sys.exit(f"unexpected arguments: {args}")
for line in entries[start:]:
    print(line, flush=True)
