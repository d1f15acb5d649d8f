"""One reader of the coordinator's `/api/groups` for bench/coordinator_http.py: from START to UNTIL (Unix
time) it reads the listing to its end, page after page, again and again, then prints one JSON line of
what it did. Only the standard library, so that a reader starts in a blink and takes little CPU: it
looks for the `continue` token in the page's tail instead of parsing the page.

    python bench/http_reader.py BASE_URL START UNTIL [--cores 0,1] [--nice 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.request

_CONTINUE = re.compile(rb'"continue": "([^"]+)"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("start", type=float)
    parser.add_argument("until", type=float)
    parser.add_argument("--cores", default="", help="comma-separated CPUs to run on")
    parser.add_argument("--nice", type=int, default=0)
    args = parser.parse_args()
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    if args.nice:
        os.nice(args.nice)
    print("ready", flush=True)
    time.sleep(max(0.0, args.start - time.time()))
    listings = pages = received = 0
    listing_seconds: list[float] = []
    slowest_page = 0.0
    while time.time() < args.until:
        started = time.perf_counter()
        url = f"{args.base}/api/groups"
        complete = False
        while time.time() < args.until:
            page_started = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=max(1.0, args.until - time.time())) as response:
                    body = response.read()
            except OSError:
                break
            slowest_page = max(slowest_page, time.perf_counter() - page_started)
            pages += 1
            received += len(body)
            found = _CONTINUE.search(body, max(0, len(body) - 300))
            if found is None:
                complete = True
                break
            url = f"{args.base}/api/groups?continue={found.group(1).decode()}"
        if complete:
            listings += 1
            listing_seconds.append(time.perf_counter() - started)
    result = {
        "listings": listings,
        "pages": pages,
        "bytes": received,
        "listing_seconds": listing_seconds,
        "slowest_page_s": slowest_page,
    }
    json.dump(result, sys.stdout)
    print(flush=True)


if __name__ == "__main__":
    main()
