"""The web page in a real headless Chromium (Debian's, driven by Playwright): type a query, see the
cards, play a moment from the keyboard and with the mouse; the video starts at the moment's start and
stops at its end."""

from __future__ import annotations

import pytest

from conftest import require_chromium
from served_index import run_live

pytest.importorskip("fastapi")
playwright = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.slow]
CHROMIUM = require_chromium()
KEY = "page-test-key-123"


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    import momentsearch
    from served_index import build_served_index

    return momentsearch.load(build_served_index(tmp_path_factory.mktemp("page")), device="cpu")


@pytest.fixture(scope="module")
def server(searcher):
    from momentsearch.service.app import create_app

    app = create_app(searcher)
    url, srv, thread = run_live(app)
    yield url, app
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def guarded(searcher):
    from momentsearch.service.app import create_app

    app = create_app(searcher, api_key=KEY)
    url, srv, thread = run_live(app)
    yield url, app
    srv.should_exit = True
    thread.join(10)


PLAYER = "document.getElementById('player')"


def test_search_then_play_a_moment_from_the_keyboard_and_the_mouse(server, tmp_path) -> None:
    url, app = server
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))
        page.goto(url + "/")
        page.wait_for_function("document.getElementById('about').textContent.includes('3 videos')")
        page.evaluate("document.activeElement.blur()")  # the box has autofocus, where "/" would be typed
        page.keyboard.press("/")  # the shortcut to the search box
        page.keyboard.type("a white square")
        assert page.input_value("#q") == "a white square"
        page.fill("#k", "4")
        page.check("#all")  # every moment, as the Python searcher ranks them (the default: one a video)
        page.press("#q", "Enter")
        page.wait_for_selector(".card")
        cards = page.query_selector_all(".card")
        api = app.state.searcher.search("a white square", k=4)
        assert len(cards) == len(api) == 4
        first_label = cards[0].get_attribute("aria-label")
        assert first_label.startswith(f"1. {api[0].video_id}, ")
        page.wait_for_function("[...document.querySelectorAll('.card img')].every(i => i.complete && i.naturalWidth > 0)")

        # where each playback starts, recorded in the page (the first 'timeupdate', at the seek's end or
        # within 250 ms of play): polling currentTime from here can miss the first 0.3 s of a moment
        # that starts at 0 and plays at once
        page.evaluate(f"window.starts = []; {PLAYER}.addEventListener('timeupdate', "
                      f"() => window.starts.push({PLAYER}.currentTime))")
        # keyboard: focus the second card and press Enter
        second = api[1]
        cards[1].focus()
        page.keyboard.press("Enter")
        page.wait_for_function("window.starts.length > 0", timeout=15000)
        assert abs(page.evaluate("window.starts[0]") - second.start) < 0.3
        # it plays, and stops at the moment's end
        page.wait_for_function(f"{PLAYER}.paused && {PLAYER}.currentTime >= {second.end} - 0.05", timeout=20000)
        t_end = page.evaluate(f"{PLAYER}.currentTime")
        assert second.end - 0.05 <= t_end <= second.end + 0.6
        assert page.inner_text("#now").startswith(f"Played {second.video_id}")

        # mouse: the first card
        first = api[0]  # the same video (a seek) or another one (a load); either way a seek lands on the start
        page.evaluate(f"window.seeks = []; {PLAYER}.addEventListener('seeked', "
                      f"() => window.seeks.push({PLAYER}.currentTime))")
        cards[0].click()
        page.wait_for_function("window.seeks.length > 0", timeout=15000)
        assert abs(page.evaluate("window.seeks[0]") - first.start) < 0.3
        page.wait_for_function(f"{PLAYER}.currentTime > window.seeks[0] + 0.1", timeout=15000)  # and it plays on
        assert page.evaluate(f"{PLAYER}.src").endswith(f"/videos/{first.video_id}")
        assert cards[0].get_attribute("aria-current") == "true"
        page.screenshot(path=str(tmp_path / "page.png"))
        browser.close()
    assert not errors, errors


def test_with_an_api_key_the_browser_asks_once_and_the_page_plays(guarded) -> None:
    """Without credentials the page is a 401 that asks for Basic auth; with the key as the password (what the
    browser's prompt sends) the page searches, its thumbnails load and its video plays."""
    url, app = guarded
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        anonymous = browser.new_context()  # (a headless browser cannot show the prompt: goto raises)
        with pytest.raises(playwright.Error, match="ERR_INVALID_AUTH_CREDENTIALS"):
            anonymous.new_page().goto(url + "/")
        r = anonymous.request.get(url + "/")
        assert r.status == 401 and r.headers["www-authenticate"].startswith("Basic")
        page = browser.new_context(http_credentials={"username": "me", "password": KEY}).new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))
        assert page.goto(url + "/").status == 200
        page.wait_for_function("document.getElementById('about').textContent.includes('3 videos')")
        page.fill("#q", "a white square")
        page.press("#q", "Enter")
        page.wait_for_selector(".card")
        page.wait_for_function("[...document.querySelectorAll('.card img')].every(i => i.complete && i.naturalWidth > 0)")
        page.query_selector_all(".card")[0].click()
        page.wait_for_function(f"{PLAYER}.currentTime > 0.2", timeout=15000)  # the video request carried the key
        browser.close()
    assert not errors, errors


def test_the_api_docs_page_renders_offline(server) -> None:
    """/docs in Chromium with every request off this server refused: Swagger UI comes from local files and
    lists the routes (no CDN, as /docs from FastAPI's defaults would need)."""
    url, _ = server
    outside: list[str] = []
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()

        def local_only(route) -> None:  # noqa: ANN001
            if route.request.url.startswith(url):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", local_only)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url + "/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=15000)
        paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.textContent.trim())")
        browser.close()
    assert {"/search", "/v1/search", "/v1/search/batch", "/metrics"} <= {x.replace("\u200b", "") for x in paths}
    assert outside == [] and not errors, (outside, errors)


def test_one_moment_a_video_by_default_and_a_link_reproduces_a_search(server) -> None:
    """The default view shows each video's best moment (no run of overlapping moments of one video); the
    address then holds the search, and opening it runs the same search."""
    url, app = server
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        page.goto(url + "/")
        page.fill("#q", "a white square")
        page.fill("#k", "5")
        page.press("#q", "Enter")
        page.wait_for_selector(".card")
        videos = page.eval_on_selector_all(".card", "cs => cs.map(c => c.dataset.video)")
        best: dict[str, float] = {}
        for h in app.state.searcher.search("a white square", k=1000):
            best.setdefault(h.video_id, h.start)
        assert videos == list(best)[:5] and len(set(videos)) == len(videos) == 3  # 3 videos in the index
        starts = page.eval_on_selector_all(".card", "cs => cs.map(c => Number(c.dataset.start))")
        assert all(abs(s - best[v]) < 1e-3 for v, s in zip(videos, starts, strict=True))
        link = page.url
        assert "q=a+white+square" in link and "k=5" in link and "all=" not in link
        other = browser.new_page()
        other.goto(link)
        other.wait_for_selector(".card")
        assert other.eval_on_selector_all(".card", "cs => cs.map(c => c.dataset.video)") == videos
        assert other.input_value("#q") == "a white square" and other.input_value("#k") == "5"
        browser.close()


def test_more_results_on_scroll_and_by_the_button_and_filters_in_the_link(server) -> None:
    """Every moment, 3 a page: scrolling to the end loads the next page, the button (from the keyboard) the one
    after, each in the Python searcher's order; a duration filter shows only the videos it passes, and its
    link reproduces it."""
    url, app = server
    want = [(h.video_id, round(h.start, 3)) for h in app.state.searcher.search("a white square", k=9)]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1000, "height": 420})
        page.goto(url + "/?q=a+white+square&k=3&all=1")
        page.wait_for_function("document.querySelectorAll('.card').length === 3")
        page.wait_for_timeout(300)
        assert page.evaluate("document.querySelectorAll('.card').length") == 3  # nothing more before a scroll
        page.mouse.wheel(0, 2000)  # scrolled to the button: the next page loads
        page.wait_for_function("document.querySelectorAll('.card').length === 6")
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(300)
        page.focus("#more")
        page.keyboard.press("Enter")
        page.wait_for_function("document.querySelectorAll('.card').length >= 9")
        got = page.eval_on_selector_all(".card", "cs => cs.map(c => [c.dataset.video, Number(c.dataset.start)])")
        assert [(v, round(s, 3)) for v, s in got[:9]] == want
        labels = page.eval_on_selector_all(".card", "cs => cs.map(c => c.getAttribute('aria-label'))")
        assert [x.split(".")[0] for x in labels[:9]] == [str(i) for i in range(1, 10)]  # ranks run on across pages

        page.goto(url + "/")
        page.fill("#q", "a white square")
        page.click("#filters summary")
        page.fill("#maxd", "6")  # clip0 is 6 s, clip1 9 s, clip2 4 s
        page.press("#q", "Enter")
        page.wait_for_selector(".card")
        videos = page.eval_on_selector_all(".card", "cs => cs.map(c => c.dataset.video)")
        assert sorted(videos) == ["clip0", "clip2"]
        assert "maxd=6" in page.url
        other = browser.new_page()
        other.goto(page.url)
        other.wait_for_selector(".card")
        assert other.eval_on_selector_all(".card", "cs => cs.map(c => c.dataset.video)") == videos
        assert other.input_value("#maxd") == "6" and other.evaluate("document.getElementById('filters').open")
        browser.close()


def test_the_page_has_no_serious_accessibility_violation(server, tmp_path) -> None:
    """axe-core (4.x, bundled with axe-playwright-python) over the page before a search, with results and
    the filters open, and with a moment playing: no violation of impact serious or critical."""
    from axe_playwright_python.sync_playwright import Axe

    url, _ = server
    axe = Axe()
    found: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        page.goto(url + "/")
        page.wait_for_function("document.getElementById('about').textContent.includes('3 videos')")
        states = ["empty"]
        results = [axe.run(page)]
        page.goto(url + "/?q=a+white+square&k=3&all=1&mind=1")
        page.wait_for_selector(".card")
        page.wait_for_function("[...document.querySelectorAll('.card img')].every(i => i.complete && i.naturalWidth > 0)")
        states.append("results")
        results.append(axe.run(page))
        page.query_selector_all(".card")[0].click()
        page.wait_for_function(f"{PLAYER}.currentTime > 0.1", timeout=15000)
        states.append("playing")
        results.append(axe.run(page))
        # the control: the same check finds what a careless change would add (an unlabelled box, grey on grey)
        page.evaluate("document.querySelector('main').insertAdjacentHTML('beforeend', '<input id=bad type=text>"
                      "<p style=\"color:#bbb;background:#ccc\">faint text</p>')")
        control = {v["id"] for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")}
        browser.close()
    assert {"label", "color-contrast"} <= control, control
    for state, r in zip(states, results, strict=True):
        assert r.response["testEngine"]["version"].startswith("4.")
        found += [f"{state}: {v['id']} ({v['impact']}): {v['help']}" for v in r.response["violations"]
                  if v["impact"] in ("serious", "critical")]
    assert found == [], found
