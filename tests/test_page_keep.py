"""The page alone, in a real headless Chromium (Debian's, driven by Playwright), over a clip index: find a moment,
download it as a playable file, click "more like this", search with a picture, save the search, and see a new
matching file dropped into the watched folder show up as an alert."""

from __future__ import annotations

import os
import time
from pathlib import Path

import av
import pytest

from conftest import require_chromium
from example_index import build_example_index, scene, write_scenes
from served_index import serve_watching

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.slow]
CHROMIUM = require_chromium()


def test_find_download_more_like_this_picture_and_an_alert_from_the_page(tmp_path: Path) -> None:
    index = build_example_index(tmp_path / "ex")
    videos = index.parent / "videos"
    url, proc = serve_watching(index, videos, tmp_path / "serve.log")
    errors: list[str] = []
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(accept_downloads=True)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(url + "/")
            page.fill("#q", "the blue wall is painted")
            page.press("#q", "Enter")
            page.wait_for_selector(".card")
            first = page.query_selector(".card")
            assert first.get_attribute("data-video") == "kitchen"
            # download this moment: a playable MP4 of exactly its frames
            with page.expect_download() as got:
                page.click("#results li:first-child a.download")
            d = got.value
            assert d.suggested_filename.startswith("kitchen_") and d.suggested_filename.endswith(".mp4")
            path = tmp_path / d.suggested_filename
            d.save_as(path)
            start, end = float(first.get_attribute("data-start")), float(first.get_attribute("data-end"))
            with av.open(str(path)) as c:
                n = sum(1 for _ in c.decode(video=0))
            assert n == round((end - start) * 10)  # 10 frames a second
            # more like this: the same moment comes first
            page.click("#results li:first-child button.like")
            page.wait_for_function("document.getElementById('status').textContent.includes('like kitchen')")
            again = page.query_selector(".card")
            assert again.get_attribute("data-video") == "kitchen"
            # a picture (chosen in the file box): the checker board is the garden's second scene
            from PIL import Image

            Image.fromarray(scene("checker", 96, 128)).save(tmp_path / "checker.png")
            page.fill("#q", "")
            page.set_input_files("#pic", str(tmp_path / "checker.png"))
            page.wait_for_selector("#pic-preview:not([hidden])")
            page.click("button[type=submit]")
            page.wait_for_function("document.getElementById('status').textContent.includes('[picture]')")
            top = page.query_selector(".card")
            assert (top.get_attribute("data-video"), top.get_attribute("data-start")) == ("garden", "3")
            page.click("#pic-clear")
            # save a text search, then a matching file lands in the watched folder: an alert shows up
            page.fill("#q", "the blue wall is painted")
            page.press("#q", "Enter")
            page.wait_for_selector("#saving:not([hidden])")
            page.fill("#alert-score", "0.6")
            page.click("#save")
            page.wait_for_selector("#saved li")
            (videos / "porch.srt").write_text("1\n00:00:04,000 --> 00:00:05,500\nthe blue wall is painted again\n\n")
            write_scenes(tmp_path / "porch.mp4", ["grey", "blue"])
            t0 = time.time()
            os.replace(tmp_path / "porch.mp4", videos / "porch.mp4")  # the file lands whole
            page.wait_for_selector("#alert-list li", timeout=90_000)  # serve --watch: settle 2 s, ingest, index, alert
            shown = time.time() - t0
            print(f"alert shown on the page {shown:.1f} s after the file landed")
            assert "porch" in page.inner_text("#alert-list") and shown < 60
            page.wait_for_function("fetch('/health').then(r => r.json()).then(h => h.videos === 4)", polling=500)
            page.click("#alert-list li button")  # plays it (the service swapped to the grown index)
            page.wait_for_function("document.getElementById('now').textContent.includes('porch')")
            browser.close()
    finally:
        proc.terminate()
        proc.wait(20)
    assert errors == [], (errors, (tmp_path / "serve.log").read_text()[-2000:])
