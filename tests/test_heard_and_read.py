"""Heard and read, offline (issue 72): speech recognised from the audio track (PocketSphinx) and text read on
screen (CRAFT + english_g2 over EasyOCR's offline weights) at ingest, searched by the clip family through
``load(...).search`` and ``/v1/search``; the pure parts (word grouping, CTC decoding, line grouping, the merge
of lines across clips, the fused moment rule) by hand; every bad input a clear error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import momentsearch
from momentsearch.cli.main import app
from momentsearch.data.corpus import Subtitle
from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.errors import ConfigError, EncoderError, SearchIndexError, SpeechError
from momentsearch.models.clip.spans import video_spans
from momentsearch.serving.indexing import build_index
from momentsearch.serving.packing import pack
from momentsearch.video.audio import RATE, audio_chunks, has_audio
from momentsearch.video.ingest import ingest
from momentsearch.video.ocr.nets import CHARACTERS, ctc_greedy
from momentsearch.video.ocr.reader import TextLine, TextReader, _group
from momentsearch.video.speech import Word, create_recogniser, cues_from_words
from momentsearch.video.written import cues_from_lines
from voices import speak, text_frame, write_damaged_audio, write_talking_video

run = CliRunner().invoke
SAID = "the person opens the red door and walks into the kitchen"


def _folder(root: Path) -> Path:
    """kitchen: SAID at 2 s, nothing written; slides: 'Quarterly sales review' on screen 6-10 s, silent;
    garden: a sentence and 'Garden party' on screen 0-4 s; notes: an SRT beside it and speech in its audio."""
    v = root / "videos"
    v.mkdir()
    write_talking_video(v / "kitchen.mp4", 10, said=[(2.0, SAID)])
    write_talking_video(v / "slides.mp4", 12, shown=[(6.0, 10.0, "Quarterly sales review")], colour=(90, 30, 30),
                        with_audio=False)
    write_talking_video(v / "garden.mp4", 8, said=[(1.0, "a dog runs across the green garden")],
                        shown=[(0.0, 4.0, "Garden party")], colour=(20, 90, 40))
    write_talking_video(v / "notes.mp4", 6, said=[(1.0, "nothing to see here")])
    (v / "notes.srt").write_text("1\n00:00:01,000 --> 00:00:03,000\nthe subtitle wins\n", encoding="utf-8")
    return v


@pytest.fixture(scope="module")
def heard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("heard")
    report = ingest(_folder(root), root / "corpus", speech="pocketsphinx", read_text=True, progress=False)
    assert sorted(report.encoded) == ["garden", "kitchen", "notes", "slides"] and not report.failures
    pack("clip", root / "both.pt", "", "", speech=True, written=True)
    build_index(root / "both.pt", root / "corpus", root / "index", progress=False)
    return root


@pytest.mark.slow
def test_ingest_stores_recognised_speech_and_text_on_screen(heard: Path) -> None:
    c = CorpusFolder.open(heard / "corpus")
    kitchen = c.entry("kitchen")
    assert kitchen["transcript"]["kind"] == "asr:pocketsphinx" and kitchen["listen"] == {
        "speech": "pocketsphinx", "read_text": True}
    said = c.transcript("kitchen")
    spoken = speak(SAID)[0]
    assert 1.9 <= said[0].start <= 2.5 and said[-1].end <= 2.0 + len(spoken) / 22050 + 0.5  # within the speech
    assert "red door" in " ".join(x.text for x in said)  # PocketSphinx on eSpeak: part of the sentence, not all
    assert c.written("kitchen") == [] and c.entry("kitchen")["written"] is None
    assert [(x.start, x.end, x.text) for x in c.written("slides")] == [(6.0, 10.0, "Quarterly sales review")]
    assert c.transcript("slides") == [] and c.entry("slides")["transcript"] is None  # no audio track
    assert [(x.start, x.end, x.text) for x in c.written("garden")] == [(0.0, 4.0, "Garden party")]
    notes = c.entry("notes")
    assert notes["transcript"]["kind"] == "srt" and [x.text for x in c.transcript("notes")] == ["the subtitle wins"]
    assert set(c.streams) == {"visual", "subtitle", "written"}
    assert (heard / "corpus" / "written" / "slides.json").is_file()


@pytest.mark.slow
def test_found_by_what_is_said_and_what_is_written(heard: Path) -> None:
    from fastapi.testclient import TestClient

    from momentsearch.service.app import create_app

    s = momentsearch.load(heard / "index")
    top = s.search("someone opens the red door", k=3)[0]
    assert top.video_id == "kitchen" and 1.9 <= top.start and top.end <= 6.5
    top = s.search("quarterly sales review", k=3)[0]
    assert (top.video_id, top.start, top.end) == ("slides", 6.0, 10.0)
    with TestClient(create_app(s, access_log=False)) as client:
        body = client.post("/v1/search", json={"query": "garden party", "k": 3}).json()
        m = body["moments"][0]
        assert m["video_id"] == "garden" and m["written"] == "Garden party"
        m = client.post("/v1/search", json={"query": "sales review", "k": 1}).json()["moments"][0]
        assert (m["video_id"], m["start"], m["end"], m["written"], m["said"]) == (
            "slides", 6.0, 10.0, "Quarterly sales review", None)


@pytest.mark.slow
def test_ingest_again_keeps_and_redoes_by_the_settings(heard: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(heard / "corpus", corpus)
    r = ingest(heard / "videos", corpus, speech="pocketsphinx", read_text=True, progress=False)
    assert len(r.kept) == 4 and not r.encoded
    r = ingest(heard / "videos", corpus, progress=False)  # no speech, no text: every video done again
    assert sorted(r.encoded) == ["garden", "kitchen", "notes", "slides"]
    c = CorpusFolder.open(corpus)
    assert set(c.streams) == {"visual", "subtitle"} and c.written("slides") == [] and c.transcript("kitchen") == []
    assert not (corpus / "written" / "slides.json").exists() and not (corpus / "features" / "written").exists()


@pytest.mark.slow
def test_written_only_model_and_its_errors(heard: Path, tmp_path: Path) -> None:
    pack("clip", tmp_path / "w.pt", "", "", written=True)
    build_index(tmp_path / "w.pt", heard / "corpus", tmp_path / "i", progress=False)
    hits = momentsearch.load(tmp_path / "i").search("sales review", k=2)
    assert (hits[0].video_id, hits[0].start, hits[0].end) == ("slides", 6.0, 10.0)
    v = tmp_path / "plain"
    v.mkdir()
    write_talking_video(v / "a.mp4", 4, with_audio=False)
    ingest(v, tmp_path / "plain_corpus", progress=False)
    with pytest.raises(SearchIndexError, match="--read-text"):
        build_index(tmp_path / "w.pt", tmp_path / "plain_corpus", tmp_path / "j", progress=False)


def test_bad_settings_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    with pytest.raises(SpeechError, match="choose auto, pocketsphinx"):
        ingest(tmp_path / "v", tmp_path / "c", speech="sphinx")
    with pytest.raises(SpeechError, match="faster-whisper|cannot load the model"):
        create_recogniser(f"whisper:{tmp_path / 'no_model'}")
    with pytest.raises(ConfigError, match="--read-text"):
        ingest(tmp_path / "v", tmp_path / "c", ocr_weights=str(tmp_path))
    with pytest.raises(EncoderError, match="craft_mlt_25k.pth: no such weights file"):
        TextReader(tmp_path)
    (tmp_path / "craft_mlt_25k.pth").write_bytes(b"not torch")
    with pytest.raises(EncoderError, match="not a readable weights file"):
        TextReader(tmp_path)
    r = run(app, ["ingest", str(tmp_path / "v"), "--out", str(tmp_path / "c"), "--speech", "nope"])
    assert r.exit_code != 0 and "choose auto, pocketsphinx" in f"{r.output} {r.exception}"
    with pytest.raises(EncoderError, match="RGB uint8"):
        TextReader().read(np.zeros((4, 4), np.uint8))


def test_audio_of_a_video_and_of_a_silent_one(tmp_path: Path) -> None:
    """2 s spoken at 22.05 kHz -> 16 kHz mono int16: about 32,000 samples (AAC adds a frame of padding); a
    video with no audio track gives none and is not an error."""
    write_talking_video(tmp_path / "a.mp4", 2, said=[(0.2, "hello")])
    chunks = list(audio_chunks(tmp_path / "a.mp4", chunk_seconds=0.5))
    n = sum(len(c) for c in chunks)
    assert has_audio(tmp_path / "a.mp4") and abs(n - 2 * RATE) <= 2048 and len(chunks) >= 4
    assert all(c.dtype == np.int16 for c in chunks) and np.abs(np.concatenate(chunks)).max() > 1000
    write_talking_video(tmp_path / "b.mp4", 2, with_audio=False)
    assert not has_audio(tmp_path / "b.mp4") and list(audio_chunks(tmp_path / "b.mp4")) == []


def test_words_into_cues_by_hand() -> None:
    """A pause of 0.6 s or more, 12 words, or 6 s start a new cue; empty words are dropped."""
    w = [Word("the", 1.0, 1.2), Word("red", 1.25, 1.5), Word(" ", 1.5, 1.6), Word("door", 1.55, 1.9),
         Word("opens", 2.6, 3.0)]
    assert cues_from_words(w) == [Subtitle(1.0, 1.9, "the red door"), Subtitle(2.6, 3.0, "opens")]
    many = [Word(f"w{i}", i * 0.3, i * 0.3 + 0.2) for i in range(14)]
    assert [c.text.count(" ") + 1 for c in cues_from_words(many)] == [12, 2]
    assert [c.start for c in cues_from_words(many, max_seconds=1.0)] == pytest.approx([0.0, 0.9, 1.8, 2.7, 3.6])
    for bad, what in (([Word("a", 2.0, 1.0)], "not a timed word"), ([Word("a", float("nan"), 1.0)], "not a timed"),
                      ([("a", 0, 1)], "not a timed word"), ([Word("a", 5.0, 6.0), Word("b", 1.0, 2.0)], "time order")):
        with pytest.raises(SpeechError, match=what):
            cues_from_words(bad)


def test_ctc_greedy_by_hand() -> None:
    """Columns best at [c, c, blank, a, a, blank, t]: 'cat'; confidence = prod(kept) ** (2 / sqrt(3)) over the
    first column of each run (0.9, 0.8, 0.7)."""
    cls = {ch: CHARACTERS.index(ch) + 1 for ch in "cat"}
    seq = [cls["c"], cls["c"], 0, cls["a"], cls["a"], 0, cls["t"]]
    best = [0.9, 0.6, 0.99, 0.8, 0.5, 0.9, 0.7]
    probs = np.full((7, len(CHARACTERS) + 1), 0.0)
    for t, (k, p) in enumerate(zip(seq, best)):
        probs[t, k] = p
        probs[t, (k + 1) % probs.shape[1]] = 1 - p
    text, conf = ctc_greedy(probs)
    assert text == "cat" and conf == pytest.approx((0.9 * 0.8 * 0.7) ** (2 / np.sqrt(3)))
    assert ctc_greedy(np.eye(len(CHARACTERS) + 1)[[0, 0]]) == ("", 0.0)


def test_lines_grouped_and_merged_over_clips_by_hand() -> None:
    # two words on a line (gap 10 px < height 20), one below, one far right on the first line (gap 200 px)
    assert _group([(60, 10, 100, 30), (0, 12, 50, 30), (0, 50, 40, 70), (300, 10, 340, 30)]) == [
        (0, 10, 100, 30), (300, 10, 340, 30), (0, 50, 40, 70)]
    line = lambda t, c=0.9: TextLine(t, c, (0, 0, 10, 10))  # noqa: E731
    per_clip = [[line("Sale today")], [line("Sa1e today", 0.5), line("Exit")], [line("sale  Today", 0.95)], [],
                [line("Sale today")]]
    # clips of 2 s, the video 9 s: 'Sale today' on clips 0-2 (a misread, 9 of 10 characters alike, and a change
    # of case and spaces merged; the most confident reading kept), 'Exit' on clip 1, 'Sale today' again on
    # clip 4 (a new cue: the line was gone), cut at the video's end
    assert cues_from_lines(per_clip, 2.0, 9.0) == [Subtitle(0.0, 6.0, "sale Today"), Subtitle(2.0, 4.0, "Exit"),
                                                   Subtitle(8.0, 9.0, "Sale today")]
    with pytest.raises(EncoderError, match="clip 0, line 0"):
        cues_from_lines([[TextLine("x", 1.5, (0, 0, 1, 1))]], 2.0, 4.0)
    with pytest.raises(EncoderError, match="clip 1, line 0"):
        cues_from_lines([[], ["x"]], 2.0, 4.0)


def test_seen_said_written_fused_by_hand() -> None:
    """3 clips of 2 s. Said s = [.6, 0, 0] (cue 0.5-1.5 s), written w = [0, 0, .8] (a line 4-6 s): the said cue
    scores ((1 + .6) / 2 + (1 + 0) / 2) / 2 = .65, the written line ((1 + 0) / 2 + (1 + .8) / 2) / 2 = .7."""
    cues = np.array([[0.5, 1.5], [-1, -1], [-1, -1]])
    wcues = np.array([[-1, -1], [-1, -1], [4.0, 6.0]])
    st, ed, sc = video_spans(None, np.array([0.6, 0, 0]), cues, 2.0, 6.0, 0.5, 16, 1,
                             ((np.array([0, 0, 0.8]), wcues),))
    assert np.allclose(st, [4.0, 0.5]) and np.allclose(ed, [6.0, 1.5]) and np.allclose(sc, [0.7, 0.65])


def test_the_reader_reads_a_drawn_frame() -> None:
    lines = TextReader().read(text_frame((320, 180), ["Exit through the kitchen"]))
    assert [x.text for x in lines] == ["Exit through the kitchen"] and lines[0].confidence > 0.5


def test_cli_ingest_with_speech_and_text(tmp_path: Path) -> None:
    v = tmp_path / "v"
    v.mkdir()
    write_talking_video(v / "a.mp4", 4, shown=[(0.0, 4.0, "Fire drill")], with_audio=False)
    r = run(app, ["ingest", str(v), "--out", str(tmp_path / "c"), "--speech", "auto", "--read-text"])
    assert r.exit_code == 0 and "1 video(s) encoded" in r.output, r.output
    stored = json.loads((tmp_path / "c" / "written" / "a.json").read_text())
    assert stored["kind"] == "ocr:craft+english_g2" and stored["cues"] == [[0.0, 4.0, "Fire drill"]]


@pytest.mark.slow
def test_the_page_shows_what_was_said_and_written_in_chromium(heard: Path, tmp_path: Path) -> None:
    """The page, in Debian's Chromium: a search for words on screen shows the slide's moment first, its card
    naming the text on screen; one for the spoken sentence, what was heard."""
    import shutil as sh

    pw = pytest.importorskip("playwright.sync_api")
    from momentsearch.service.app import create_app
    from served_index import run_live

    url, srv, _ = run_live(create_app(momentsearch.load(heard / "index"), access_log=False))
    try:
        with pw.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=sh.which("chromium") or "/usr/bin/chromium")
            page = browser.new_page()
            page.goto(url + "/")
            page.fill("#q", "quarterly sales review")
            page.press("#q", "Enter")
            page.wait_for_selector(".card .written")
            first = page.query_selector_all(".card")[0]
            assert first.get_attribute("aria-label").startswith("1. slides, ")
            assert first.query_selector(".written").inner_text() == "on screen: Quarterly sales review"
            page.fill("#q", "someone opens the red door")
            page.press("#q", "Enter")
            page.wait_for_function("document.querySelector('.card')?.getAttribute('aria-label')?.startsWith('1. kitchen')")
            assert page.query_selector(".card .said").inner_text().startswith("said: ")
            page.screenshot(path=str(tmp_path / "heard_page.png"))
            browser.close()
    finally:
        srv.should_exit = True


def test_whisper_windows_and_word_times_with_a_stand_in_model() -> None:
    """No Whisper weights can be had here (nothing downloads): the wrapper's own part, the windows and their
    offsets, over a stand-in with faster-whisper's ``transcribe`` signature that says one word per window, at
    0.5-0.9 s into it. 5 s of audio in 2 s windows: words at 0.5, 2.5 and 4.5 s."""
    from types import SimpleNamespace

    from momentsearch.video.speech import FasterWhisper

    class StandIn:
        def transcribe(self, audio, word_timestamps, language):  # noqa: ANN001, ANN202
            assert word_timestamps and language == "en" and audio.dtype == np.float32
            words = [SimpleNamespace(word=f" w{len(audio)}", start=0.5, end=0.9)]
            return iter([SimpleNamespace(words=words)]), None

    rec = FasterWhisper.__new__(FasterWhisper)
    rec.model, rec.window = StandIn(), 2.0
    got = rec.words(np.zeros(RATE // 2, np.int16) for _ in range(10))
    assert [(w.text, w.start, w.end) for w in got] == [("w32000", 0.5, 0.9), ("w32000", 2.5, 2.9), ("w16000", 4.5, 4.9)]


@pytest.mark.slow
def test_watch_keeps_hearing_and_reading_as_the_corpus_was_ingested(heard: Path, tmp_path: Path) -> None:
    """A watch over a corpus ingested with --speech and --read-text: a new file is heard and read too, and the
    old ones are kept (not done again without their speech and text)."""
    from momentsearch.serving.watch import Watcher

    videos = tmp_path / "videos"
    shutil.copytree(heard / "videos", videos)
    corpus, index = tmp_path / "corpus", tmp_path / "index"
    shutil.copytree(heard / "corpus", corpus)  # the files keep their times: the copy is up to date with them
    build_index(heard / "both.pt", corpus, index, progress=False)
    write_talking_video(videos / "new.mp4", 4, shown=[(0.0, 4.0, "Fire drill")], with_audio=False)
    done = Watcher(videos, corpus, index, settle=0.0).step()
    assert done is not None and done.ingest.encoded == ["new"] and len(done.ingest.kept) == 4
    c = CorpusFolder.open(corpus)
    assert [x.text for x in c.written("new")] == ["Fire drill"] and c.entry("kitchen")["transcript"] is not None
    hits = momentsearch.load(index).search("fire drill", k=1)
    assert hits[0].video_id == "new"


def test_a_damaged_audio_track_is_a_warning_and_the_video_is_kept(tmp_path: Path) -> None:
    v = tmp_path / "v"
    v.mkdir()
    write_damaged_audio(v / "broken_sound.mp4")
    r = ingest(v, tmp_path / "c", speech="pocketsphinx", progress=False)
    assert r.encoded == ["broken_sound"] and not r.failures
    assert len(r.warnings) == 1 and "its audio stream could not be decoded" in r.warnings[0]["warning"]
    assert "ingested without recognised speech" in r.warnings[0]["warning"]
    c = CorpusFolder.open(tmp_path / "c")
    assert c.entry("broken_sound")["transcript"] is None and c.entry("broken_sound")["n_clips"] == 2


def test_audio_that_ends_on_a_frame_boundary() -> None:
    """PocketSphinx's endpointer reads 30 ms frames (960 bytes); audio whose length is a whole number of frames
    leaves nothing for its end_stream, which raised IndexError on an empty buffer (found by the fuzz run)."""
    rec = create_recogniser("pocketsphinx")
    wav, rate = speak("the red door")
    from scipy.signal import resample_poly

    a = resample_poly(wav.astype(np.float32), 160, 221).astype(np.int16)
    a = np.concatenate([np.zeros(RATE // 2, np.int16), a, np.zeros(RATE // 2, np.int16)])
    a = a[: len(a) // 480 * 480]
    assert len(a) * 2 % 960 == 0
    words = rec.words([a])
    assert words and all(0.3 <= w.start <= w.end <= len(a) / RATE for w in words)
