"""``clip``: a training-free searcher of what is seen and what is said.

* **Seen**: the query goes through CLIP's text tower; each clip of the corpus already holds the image
  embedding of the same CLIP (the corpus was ingested with its image tower).
* **Said**: the query's MiniLM sentence embedding (offline) against each clip's subtitle stream (MiniLM of the
  cues overlapping it: subtitles, a transcript, a subtitle stream or recognised speech, as ingest read them).
* **Written**: the same MiniLM embedding against each clip's written stream (MiniLM of the text read on screen
  by ``ingest --read-text``), its moments spanning the lines' time on screen.

A video scores by the mean over the searched streams of its best clip's cosine; its moments and their scores
follow :mod:`momentsearch.models.clip.spans` (seen: spans of high similarity on the clip grid; said: the cues'
own boundaries). It is packed, not trained: ``momentsearch pack clip --encoder hf_clip --encoder-weights DIR
--out clip.pt`` (seen), ``pack clip --speech --out said.pt`` (said, no weights needed), ``--written`` (the text
on screen), or several (fused);
then ``index`` and ``search`` as any model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import torch
from torch import nn

from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.data.transcripts import cue_spans
from momentsearch.errors import ConfigError, EncoderError, QueryError
from momentsearch.models.clip.config import RULE_OPTIONS, SPEECH_DIM, CLIPSearchConfig
from momentsearch.models.clip.network import HFCLIPText, OpenCLIPText, text_tower
from momentsearch.models.clip.spans import video_spans
from momentsearch.models.family import BatchSource, InputDims, ModelFamily, Step, TrainingData
from momentsearch.models.registry import register
from momentsearch.search.clipmax import ClipMaxRetriever
from momentsearch.search.index import VideoIndex, concat_ragged
from momentsearch.search.stages import Proposals, Queries, SearchStages
from momentsearch.text.encoders import SENTENCE_ENCODER, MiniLMSentenceEncoder
from momentsearch.text.query_encoders import QueryEncoder as BaseQueryEncoder
from momentsearch.text.query_encoders import check_queries, register_query_encoder

NOT_TRAINED = ("model family 'clip' needs no training: pack it with `momentsearch pack clip --encoder hf_clip "
               "--encoder-weights DIR --out clip.pt` (or open_clip:ARCH[@TAG]; add --speech to search what is "
               "said too, or give --speech alone) and index a corpus made by that encoder")


@register_query_encoder
class CLIPQueryEncoder(BaseQueryEncoder):
    """Texts -> one (S, width) array each, the 'token features' the clip stages read: row 0 the CLIP text
    embedding (when seen is searched), then the MiniLM sentence embedding (when said is), zero-padded."""

    encoder, kind = "clip", "embedding"

    def __init__(self, identity: Mapping[str, Any] | None = None, model: nn.Module | None = None,
                 cfg: CLIPSearchConfig | None = None, batch_size: int = 64):
        if model is None or cfg is None:
            raise QueryError("the clip query encoder is the text tower inside a clip checkpoint: "
                             "load the checkpoint (momentsearch.load) rather than naming the encoder")
        self.tower, self.cfg, self.batch_size = model, cfg, batch_size
        self.dim = cfg.width
        self.sentences = MiniLMSentenceEncoder() if cfg.speech or cfg.written else None

    def identity(self) -> dict[str, Any]:
        return CLIPFamily(self.cfg).text_encoder

    def encode(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        check_queries(texts)
        out: list[np.ndarray] = []
        for s in range(0, len(texts), self.batch_size):
            chunk = [t.strip() for t in texts[s: s + self.batch_size]]
            rows = np.zeros((len(chunk), len(self.cfg.streams), self.cfg.width), np.float32)
            r = 0
            if self.cfg.vision:
                emb = self.tower.encode_text(chunk).cpu().numpy()  # type: ignore[operator]
                rows[:, r, : emb.shape[1]] = emb
                r += 1
            if self.sentences is not None:  # said and written: the same MiniLM vector of the query
                rows[:, r:, :SPEECH_DIM] = self.sentences.encode(chunk)[:, None]
            out.extend(rows)
        return out


class CLIPLocalizer:
    """Each candidate's moments by :mod:`~momentsearch.models.clip.spans`, in seconds."""

    provides = frozenset({"spans", "score_bound"})

    def __init__(self, index: VideoIndex, cfg: CLIPSearchConfig):
        self.index, self.cfg = index, cfg

    def score_bound(self, video_scores: torch.Tensor) -> torch.Tensor:
        """A moment scores at most (1 + the video's retrieval score) / 2 (the mean over streams of each best
        clip's cosine); +1e-5: the retriever and this localizer compute the cosines apart, in float32."""
        return (1.0 + video_scores.float()) / 2.0 + 1e-5

    def _cosines(self, q: np.ndarray, v: int) -> np.ndarray:
        """(S, T): each stream's query vector against the video's clips, cosine (0 for an all-zero row)."""
        a, b = int(self.index.offsets[v]), int(self.index.offsets[v + 1])
        clips = np.asarray(self.index.array("img")[a:b], np.float32)  # (T, S, width)
        clips /= np.maximum(np.linalg.norm(clips, axis=2, keepdims=True), 1e-12)
        return np.einsum("tsd,sd->st", clips, q)

    def spans(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None, n: int) -> Proposals:
        s_n = len(self.cfg.streams)
        q = torch.nn.functional.normalize(queries.tokens[:, :s_n].float(), dim=-1).cpu().numpy()  # (B, S, width)
        b, k = videos.shape
        out = Proposals.empty(b, k, n, np.float32)
        cues, wcues = self.index.arrays.get("cues"), self.index.arrays.get("written_cues")
        for i in range(b):
            for j in range(k):
                v = int(videos[i, j])
                cos = self._cosines(q[i], v)
                a, z = int(self.index.offsets[v]), int(self.index.offsets[v + 1])
                seen = cos[0] if self.cfg.vision else None
                said = cos[int(self.cfg.vision)] if self.cfg.speech else None
                more = ((cos[-1], np.asarray(wcues[a:z], np.float64)),) if self.cfg.written else ()
                s_, e_, p_ = video_spans(seen, said, np.asarray(cues[a:z], np.float64) if cues is not None else
                                         np.full((z - a, 2), -1.0), float(self.index.clip_lengths[v]),
                                         float(self.index.durations[v]), self.cfg.kappa, self.cfg.max_clips,
                                         self.cfg.smooth, more)
                m = min(n, len(s_))
                out.start[i, j, :m], out.end[i, j, :m], out.score[i, j, :m] = s_[:m], e_[:m], p_[:m]
                out.valid[i, j, :m] = True
        return out


@register
class CLIPFamily(ModelFamily):
    name = "clip"
    version = 1
    packable = True
    config_class = CLIPSearchConfig
    cfg: CLIPSearchConfig

    def build(self, dims: InputDims) -> nn.Module:
        raise ConfigError(NOT_TRAINED)

    def restore(self) -> nn.Module:
        return text_tower(self.cfg)

    @property
    def max_tokens(self) -> int:
        return len(self.cfg.streams)  # one 'token' per stream: its query embedding

    @property
    def text_encoder(self) -> dict[str, Any]:
        said = {"speech": SENTENCE_ENCODER} if self.cfg.speech else {}
        said |= {"written": SENTENCE_ENCODER} if self.cfg.written else {}
        if not self.cfg.vision:
            texts = "+".join(s for s in self.cfg.streams if s != "seen")
            return {"name": f"{texts}:" + SENTENCE_ENCODER["name"], "kind": "embedding", "dim": SPEECH_DIM, **said,
                    "max_tokens": SENTENCE_ENCODER["config"]["max_tokens"], "encoder": "clip"}
        weights = (self.cfg.image_encoder.get("config") or {}).get("weights")
        return {"name": f"clip-text:{self.cfg.backend}{':' + self.cfg.arch if self.cfg.arch else ''}",
                "kind": "embedding", "dim": self.cfg.dim, "weights": weights, "max_tokens": self.cfg.context_length,
                **said, "encoder": "clip"}

    def query_encoder(self, model: nn.Module | None = None) -> Any:
        if model is None:  # a training run asks before it builds anything: this family is not trained
            raise ConfigError(NOT_TRAINED)
        return CLIPQueryEncoder(model=model, cfg=self.cfg)

    def check_features(self, model_features: dict[str, Any] | None, corpus_encoder: dict[str, Any],
                       dims: dict[str, int], streams: dict[str, dict[str, Any]] | None = None) -> str | None:
        from momentsearch.video.encoders.base import describe, same_encoder

        if self.cfg.vision and not same_encoder(self.cfg.image_encoder, corpus_encoder):
            return (f"its CLIP text tower pairs with image embeddings of {describe(self.cfg.image_encoder)}, and the "
                    f"corpus was made by {describe(corpus_encoder)}: ingest the videos with that encoder")
        if self.cfg.speech and not self.cfg.vision and dims.get("subtitle") != SPEECH_DIM:
            return ("it searches what is said, and the corpus holds nothing said (no subtitle stream of MiniLM "
                    "vectors): put VIDEO.srt, VIDEO.vtt or a whisper VIDEO.json beside the videos (or use files "
                    "with a subtitle stream) and ingest again")
        if self.cfg.written and not (self.cfg.vision or self.cfg.speech) and dims.get("written") != SPEECH_DIM:
            return ("it searches the text on screen, and the corpus holds none (no written stream): ingest the "
                    "videos with --read-text (a corpus where no text was found on screen has no written stream)")
        made_by = ((streams or {}).get("subtitle") or {}).get("encoder")
        if self.cfg.speech and made_by is not None and not (
                made_by.get("name") == SENTENCE_ENCODER["name"] and made_by.get("config") == SENTENCE_ENCODER["config"]):
            return (f"it searches what is said with MiniLM sentence vectors, and the corpus's subtitle stream was made "
                    f"by {made_by.get('name', '?')}: ingest the videos (with their subtitles) to search what is said")
        return None

    def batches(self, data: TrainingData) -> BatchSource:
        raise ConfigError(NOT_TRAINED)

    def loss(self, model: nn.Module, batch: Any, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        raise ConfigError(NOT_TRAINED)

    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        """Per clip, each searched stream's vector, normalised (zeros where nothing is said or written), as the
        index's ``img`` array (clips, S, width) fp16; with speech, ``cues`` (clips, 2): the span of the cues
        overlapping each clip in seconds (-1 where none; the clip's own span where the corpus has vectors but no
        cues); with the text on screen, ``written_cues`` the same for its lines."""
        cfg = self.cfg
        said, written = store.subtitle, store.written
        texts = {name: (cfg.streams.index(stream), vectors, read) for name, stream, vectors, read in (
            ("cues", "said", lambda vid: None if said is None else said[vid], store.transcripts),
            ("written_cues", "written", lambda vid: written[vid] if written is not None and vid in written else None,
             store.written_cues)) if stream in cfg.streams}
        per, spans = [], {name: [] for name in texts}
        for v in videos:
            vis = store[v.video_id]
            rows = np.zeros((len(vis), len(cfg.streams), cfg.width), np.float32)
            if cfg.vision:
                x = np.asarray(vis, np.float32)
                rows[:, 0, : x.shape[1]] = _unit(x)
            for name, (row, vectors, read) in texts.items():
                got = vectors(v.video_id)
                x = np.zeros((len(vis), SPEECH_DIM), np.float32) if got is None else np.asarray(got, np.float32)
                rows[:, row, :SPEECH_DIM] = _unit(x)
                spans[name].append(_cue_rows(read, v, len(vis), clip_lengths[v.video_id], np.abs(x).sum(1) > 0))
            per.append(rows.astype(np.float16))
        img, offsets = concat_ragged(per)
        arrays = {"img": img, **{name: np.concatenate(s).astype(np.float64) for name, s in spans.items()}}
        return self.stamped(VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                                       np.array([clip_lengths[v.video_id] for v in videos], np.float64), offsets,
                                       arrays))

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        s_n = len(self.cfg.streams)
        retriever = ClipMaxRetriever(lambda q: q.tokens[:, :s_n], index, "img", cosine=True, device=device)
        return SearchStages(retriever, CLIPLocalizer(index, self.cfg))  # type: ignore[arg-type]

    takes_examples = True

    def moment_vectors(self, index: VideoIndex, row: int, start: float, end: float) -> np.ndarray:
        """(S, width): per stream, the mean of the unit vectors of the video's clips that ``[start, end)`` overlaps
        (a zero row where that stream holds nothing there)."""
        a, z = int(index.offsets[row]), int(index.offsets[row + 1])
        dt = float(index.clip_lengths[row])
        first = min(max(int(np.floor(start / dt + 1e-9)), 0), z - a - 1)
        last = min(max(int(np.ceil(end / dt - 1e-9)) - 1, first), z - a - 1)
        clips = np.asarray(index.array("img")[a + first: a + last + 1], np.float32)  # (n, S, width)
        out = np.zeros((len(self.cfg.streams), self.cfg.width), np.float32)
        for s in range(len(self.cfg.streams)):
            held = clips[:, s][np.abs(clips[:, s]).sum(1) > 0]
            if len(held):
                out[s] = _unit(held).mean(0)
        return out

    def example_query(self, text: np.ndarray | None, images: np.ndarray | None, moment: np.ndarray | None
                      ) -> np.ndarray:
        """Per stream, the normalised mean of the unit vectors given for it: the text's (each stream), the
        pictures' (seen only; each an image embedding of the corpus's encoder) and the moment's
        (:meth:`moment_vectors`, each stream it holds). A clip's cosine with the result is so proportional to the
        sum of its cosines with each part: words and picture weigh alike. A stream no part speaks to stays zero
        (cosine 0 for every clip: it proposes and ranks nothing)."""
        cfg = self.cfg
        parts: list[list[np.ndarray]] = [[] for _ in cfg.streams]
        for given in (text, moment):
            if given is not None:
                for s, row in enumerate(np.asarray(given, np.float32)[: len(cfg.streams)]):
                    parts[s].append(row)
        if images is not None:
            if not cfg.vision:
                raise QueryError("this clip model searches what is said or written only, so a picture cannot be a "
                                 "query: pack it with an image encoder (--encoder) to search what is seen")
            for img in np.asarray(images, np.float32):
                parts[0].append(np.pad(img, (0, max(cfg.width - len(img), 0)))[: cfg.width])
        out = np.zeros((len(cfg.streams), cfg.width), np.float32)
        for s, got in enumerate(parts):
            units = [x / n for x in got if (n := float(np.linalg.norm(x))) > 0]
            if units:
                out[s] = _unit(np.mean(units, axis=0)[None])[0]
        if not out.any():
            raise QueryError("the query holds nothing this model can search: the moment has nothing seen, said or "
                             "written")
        return out

    # ---- packing ---------------------------------------------------------------------------------
    @classmethod
    def pack(cls, encoder: str = "", weights: str = "", speech: bool = False, written: bool = False, **options: Any
             ) -> tuple[CLIPFamily, nn.Module, dict[str, Any]]:
        """(family, text tower, the image encoder's identity) for ``encoder``: ``hf_clip`` with a model
        folder, or ``open_clip:ARCH[@TAG]`` with a weights file or tag; ``speech``: search what is said too
        (with no ``encoder``: what is said only, no weights needed). ``options``: the moment rule's."""
        from momentsearch.video.encoders.base import create_encoder

        for key in options:
            if key not in RULE_OPTIONS:
                why = ("settings that come from the encoder and its weights cannot be set" if key in
                       {f.name for f in fields(CLIPSearchConfig)} else "unexpected keyword argument")
                raise ConfigError(f"pack clip: {why} {key!r}; the options are {', '.join(RULE_OPTIONS)}")
        kind = encoder.partition(":")[0]
        if kind in ("", "none"):
            if not (speech or written):
                raise ConfigError("pack clip: give --encoder (hf_clip or open_clip:ARCH, with its weights) to search "
                                  "what is seen, --speech to search what is said, --written the text on screen, or "
                                  "several")
            cfg = CLIPSearchConfig(backend="none", speech=speech, written=written, **options)
            return cls(cfg), text_tower(cfg), dict(SENTENCE_ENCODER, stream="subtitle" if speech else "written")
        if kind == "hf_clip":
            from momentsearch.video.encoders.hf_clip import load_hf_clip, tower_config

            image = create_encoder("hf_clip", weights=weights)
            full = load_hf_clip(weights)
            tok, pad = _hf_tokenizer(weights, int(full.config.text_config.eos_token_id))
            cfg = CLIPSearchConfig(backend="hf_clip", text_config=tower_config(full, "text"),
                                   tokenizer_bytes=len(tok.encode("utf-8")), pad_id=pad,
                                   context_length=int(full.config.text_config.max_position_embeddings),
                                   image_encoder=image.identity(), speech=speech, written=written, **options)
            tower: nn.Module = HFCLIPText(cfg)
            tower.tower.load_state_dict({k: v for k, v in full.state_dict().items()  # type: ignore[union-attr]
                                         if k.startswith(("text_model.", "text_projection."))})
            tower.set_tokenizer(tok)  # type: ignore[operator]
        elif kind == "open_clip":
            from momentsearch.video.encoders.open_clip import import_open_clip, weights_source

            image = create_encoder(encoder, weights=weights)
            arch, _, pretrained = weights_source(encoder.partition(":")[2], weights, False)
            model = import_open_clip().create_model(arch, pretrained=pretrained)
            cfg = CLIPSearchConfig(backend="open_clip", arch=arch, context_length=int(model.context_length),
                                   image_encoder=image.identity(), speech=speech, written=written, **options)
            tower = OpenCLIPText(cfg, model)
        else:
            raise EncoderError(f"the clip family reads hf_clip or open_clip:ARCH corpora, not {encoder!r}")
        fam = cls(cfg)
        return fam, tower.eval(), image.identity()


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (an all-zero row stays zero)."""
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _cue_rows(read: Any, video: Video, n: int, dt: float, spoken: np.ndarray) -> np.ndarray:
    """(n, 2) per clip: the span of the cues overlapping it (-1, -1 where nothing is said); ``read``: video id ->
    its cues (the store's transcripts or written cues), or None."""
    out = np.full((n, 2), -1.0)
    cues = read(video.video_id) if read is not None else []
    if cues:
        for c, span in enumerate(cue_spans(cues, n, dt)):
            if span is not None:
                out[c] = span
    else:  # vectors without cue times (a dataset's subtitle features): the clips' own spans
        idx = np.flatnonzero(spoken)
        out[idx, 0], out[idx, 1] = idx * dt, np.minimum((idx + 1) * dt, video.duration)
    return out


def _hf_tokenizer(folder: str, eos_id: int) -> tuple[str, int]:
    """(tokenizer.json as text, the pad id): CLIP pads with its end-of-text token."""
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        data = tok.backend_tokenizer.to_str()
    except Exception as e:  # noqa: BLE001 - missing or unreadable tokenizer files
        raise EncoderError(f"{folder}: no usable CLIP tokenizer (tokenizer.json, or vocab.json and merges.txt): "
                           f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return data, int(pad if pad is not None else eos_id)


__all__ = ["CLIPFamily", "CLIPSearchConfig"]
