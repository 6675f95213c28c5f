"""The README's screenshots of the page, taken in Debian's Chromium (Playwright) over a served index.

    python benchmarks/page_screenshots.py --index runs/demo/index [--out docs/images]

Writes ``page.png`` (a search, each video's best moment, the first card playing) and ``page_filters.png``
(the filters open with a length filter, every moment, the second page loaded). The server is warmed first,
so the "in N ms" on the page is a warm query's time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_load import free_port  # noqa: E402
from service_soak import start, wait_ready  # noqa: E402

PLAYER = "document.getElementById('player')"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("docs/images"))
    ap.add_argument("--query", default="a person opens the door")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(args.index, port, Path(f"/tmp/page_screenshots_{port}.log"))
    try:
        wait_ready(base, proc)
        for _ in range(5):
            httpx.post(base + "/v1/search", json={"query": args.query, "k": 10}, timeout=60)
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1200, "height": 760})
            page.goto(base + "/")
            page.fill("#q", args.query)
            page.fill("#k", "5")
            page.press("#q", "Enter")
            page.wait_for_selector(".card")
            page.wait_for_function("[...document.querySelectorAll('.card img')].every(i => i.complete)")
            page.query_selector_all(".card")[0].click()
            page.wait_for_function(f"{PLAYER}.currentTime > 0.5", timeout=20000)
            page.screenshot(path=str(args.out / "page.png"))
            page.goto(base + f"/?q={args.query.replace(' ', '+')}&k=3&all=1&maxd=120")
            page.wait_for_selector(".card")
            page.click("#more")
            page.wait_for_function("document.querySelectorAll('.card').length >= 6")
            page.wait_for_function("[...document.querySelectorAll('.card img')].every(i => i.complete)")
            page.evaluate("window.scrollTo(0, 0)")
            page.query_selector_all(".card")[1].click()
            page.wait_for_function(f"{PLAYER}.currentTime > 0.5", timeout=20000)
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(args.out / "page_filters.png"))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"wrote {args.out / 'page.png'} and {args.out / 'page_filters.png'}")


if __name__ == "__main__":
    main()
