// momentsearch page: search (words, a picture, or more like a found moment), show moments as cards, play a moment
// from its start to its end, download it, save a search and see the alerts new videos raise.
"use strict";
(function () {
  const form = document.getElementById("search");
  const q = document.getElementById("q");
  const kInput = document.getElementById("k");
  const status = document.getElementById("status");
  const results = document.getElementById("results");
  const viewer = document.getElementById("viewer");
  const player = document.getElementById("player");
  const now = document.getElementById("now");
  let stopAt = null;
  let current = null;

  function mmss(t) {
    const s = Math.max(0, Math.floor(t));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const mm = String(m).padStart(h ? 2 : 2, "0"), ss = String(r).padStart(2, "0");
    return h ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  fetch("/health").then(r => r.json()).then(h => {
    document.getElementById("about").textContent =
      `${h.videos} videos, ${h.family} model, first stage ${h.first_stage}` +
      (h.video_files ? "" : " (features only: no video files to play)");
  }).catch(() => {});

  function card(m) {
    const li = el("li");
    const b = el("button", "card");
    b.type = "button";
    b.dataset.video = m.video_id;
    b.dataset.start = m.start;
    b.dataset.end = m.end;
    const span = `${mmss(m.start)}-${mmss(m.end)}`;
    b.setAttribute("aria-label", `${m.rank}. ${m.video_id}, ${span}, score ${m.score.toFixed(3)}` +
      (m.video_url ? "" : ", no video file"));
    if (m.thumbnail_url) {
      const img = el("img");
      img.src = m.thumbnail_url;
      img.alt = "";
      img.loading = "lazy";
      b.appendChild(img);
    } else {
      b.appendChild(el("div", "nothumb", "no video"));
    }
    const text = el("div", "text");
    text.appendChild(el("div", "name", m.video_id));
    text.appendChild(el("div", "span", span));
    text.appendChild(el("div", "score", `score ${m.score.toFixed(3)}`));
    if (m.annotation && m.annotation !== m.said) text.appendChild(el("div", "annotation", m.annotation));
    if (m.said) text.appendChild(el("div", "said", `said: ${m.said}`));
    if (m.written) text.appendChild(el("div", "written", `on screen: ${m.written}`));
    b.appendChild(text);
    if (!m.video_url) b.disabled = true;
    b.addEventListener("click", () => play(m, b));
    li.appendChild(b);
    const actions = el("div", "actions");
    if (m.video_url) {
      const a = el("a", "download", "Download this moment");
      a.href = `/v1/clips/${encodeURIComponent(m.video_id)}?start=${m.start}&end=${m.end}`;
      a.download = "";
      actions.appendChild(a);
    }
    const like = el("button", "like", "More like this");
    like.type = "button";
    like.addEventListener("click", () => {
      run({ like: { video_id: m.video_id, start: m.start, end: m.end } },
        Math.min(100, Math.max(1, parseInt(kInput.value, 10) || 10)), every.checked);
    });
    actions.appendChild(like);
    li.appendChild(actions);
    return li;
  }

  function play(m, button) {
    if (!m.video_url) return;
    document.querySelectorAll(".card[aria-current]").forEach(c => c.removeAttribute("aria-current"));
    button.setAttribute("aria-current", "true");
    viewer.hidden = false;
    current = m;
    stopAt = m.end;
    now.textContent = `Playing ${m.video_id} from ${mmss(m.start)} to ${mmss(m.end)}`;
    const start = () => {
      player.currentTime = m.start;
      player.play().catch(() => {});
    };
    if (player.dataset.src !== m.video_url) {
      player.dataset.src = m.video_url;
      player.src = m.video_url;
      player.addEventListener("loadedmetadata", start, { once: true });
      player.load();
    } else {
      start();
    }
  }

  player.addEventListener("timeupdate", () => {
    if (stopAt !== null && player.currentTime >= stopAt) {
      player.pause();
      stopAt = null;
      if (current) now.textContent = `Played ${current.video_id} ${mmss(current.start)}-${mmss(current.end)}`;
    }
  });
  player.addEventListener("seeking", () => {  // the user moved away from the moment: let it play on
    if (current && stopAt !== null && (player.currentTime < current.start - 0.5 || player.currentTime > current.end)) stopAt = null;
  });

  const every = document.getElementById("all");
  const more = document.getElementById("more");
  const fields = { prefix: "path_prefix", mind: "min_duration", maxd: "max_duration", after: "ingested_after" };
  let last = null;  // the search on screen: its request body and the next page's offset
  let loading = false;

  // the filters' request fields, from the form (empty boxes: no filter)
  function filters() {
    const out = {};
    for (const [id, field] of Object.entries(fields)) {
      const v = document.getElementById(id).value.trim();
      if (!v) continue;
      out[field] = id === "mind" || id === "maxd" ? Number(v) : v;
    }
    return out;
  }

  async function page(body) {
    const r = await fetch("/v1/search", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const answer = await r.json();
    if (!r.ok) throw new Error(answer.error || String(r.status));
    return answer;
  }

  // the picture to search with (base64 of its file), from the file box or dropped on the form
  const pic = document.getElementById("pic");
  const preview = document.getElementById("pic-preview");
  const clearPic = document.getElementById("pic-clear");
  const picRow = document.getElementById("picture-row");
  let picture = null;
  function usePicture(file) {
    if (!file) return;
    const reader = new FileReader();
    reader.onload = () => {
      picture = String(reader.result).split(",")[1];
      preview.src = String(reader.result);
      preview.hidden = clearPic.hidden = false;
    };
    reader.readAsDataURL(file);
  }
  pic.addEventListener("change", () => usePicture(pic.files[0]));
  clearPic.addEventListener("click", () => {
    picture = null; pic.value = ""; preview.hidden = clearPic.hidden = true; preview.removeAttribute("src");
  });
  form.addEventListener("dragover", (ev) => { ev.preventDefault(); picRow.classList.add("over"); });
  form.addEventListener("dragleave", () => picRow.classList.remove("over"));
  form.addEventListener("drop", (ev) => {
    ev.preventDefault();
    picRow.classList.remove("over");
    if (ev.dataTransfer.files.length) usePicture(ev.dataTransfer.files[0]);
  });

  function shown(all, query, ms) {
    const n = results.children.length;
    status.textContent = n
      ? `${n} ${all ? "moments" : "videos' best moments"} for “${query}” in ${Math.round(ms)} ms` +
        (last && last.next !== null ? " (more below)" : "")
      : `No moments for “${query}”.`;
  }

  // one search: each video's best moment by default (every moment with the box ticked). ``ask``: {query}, with
  // {image} (a picture, base64) or {like} (a moment); a text search's query, k, box and filters go in the
  // address, so a link reproduces it
  async function run(ask, k, all) {
    status.textContent = "Searching…";
    results.replaceChildren();
    more.hidden = true;
    saving.hidden = true;
    const params = new URLSearchParams(ask.query ? { q: ask.query, k: String(k) } : {});
    if (ask.query && all) params.set("all", "1");
    for (const id of Object.keys(fields)) {
      const v = document.getElementById(id).value.trim();
      if (v && ask.query) params.set(id, v);
    }
    history.replaceState(null, "", params.toString() ? `?${params}` : location.pathname);
    const body = { ...ask, k, group_by_video: !all, ...filters() };
    try {
      const answer = await page(body);
      last = { body, next: answer.next_offset, all };
      answer.moments.forEach(m => results.appendChild(card(m)));
      more.hidden = answer.next_offset === null;
      shown(all, answer.query, answer.took_ms);
      if (ask.query && !ask.image && !ask.like && answer.moments.length && alertsOn) {
        saving.hidden = false;  // words can be saved: alert at about the top moment's score
        saveScore.value = (Math.floor(answer.moments[0].score * 100) / 100 - 0.05).toFixed(2);
        saving.dataset.query = ask.query;
      }
    } catch (e) {
      last = null;
      status.textContent = e instanceof TypeError ? `The server could not be reached (${e}).` : `Error: ${e.message}`;
    }
  }

  // the next page of the search on screen: by the button, or when the button scrolls into view
  async function loadMore() {
    if (!last || last.next === null || loading) return;
    loading = true;
    try {
      const answer = await page({ ...last.body, offset: last.next });
      last.next = answer.next_offset;
      answer.moments.forEach(m => results.appendChild(card(m)));
      more.hidden = answer.next_offset === null;
      shown(last.all, answer.query, answer.took_ms);
    } catch (e) {
      status.textContent = `Error: ${e.message}`;
    } finally {
      loading = false;
    }
  }
  more.addEventListener("click", loadMore);
  // on scroll: the button coming into view loads the next page, once the user has scrolled (a short list
  // that shows the button at once waits for a scroll or a click)
  let scrolled = false;
  window.addEventListener("scroll", () => { scrolled = true; }, { passive: true });
  if ("IntersectionObserver" in window) {
    new IntersectionObserver(entries => {
      if (scrolled && entries.some(e => e.isIntersecting)) { scrolled = false; loadMore(); }
    }).observe(more);
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const query = q.value.trim();
    if (!query && !picture) { status.textContent = "Type a query or choose a picture first."; return; }
    const k = Math.min(100, Math.max(1, parseInt(kInput.value, 10) || 10));
    const ask = query ? { query } : {};
    if (picture) ask.image = picture;
    run(ask, k, every.checked);
  });

  // saved searches and their alerts: saved from a text search, listed and polled every 3 s
  const saving = document.getElementById("saving");
  const saveScore = document.getElementById("alert-score");
  const alertsBox = document.getElementById("alerts");
  const savedList = document.getElementById("saved");
  const alertList = document.getElementById("alert-list");
  let alertsOn = true, seenAlerts = 0;
  async function refreshAlerts() {
    if (!alertsOn) return;
    try {
      const r = await fetch(`/v1/alerts?since=${seenAlerts}`);
      if (r.status === 404) { alertsOn = false; return; }  // an index with no folder keeps no saved searches
      const got = await r.json();
      if (!r.ok) return;
      savedList.replaceChildren(...got.searches.map(s => {
        const li = el("li", "", `“${s.query}” at score ≥ ${s.min_score} `);
        const rm = el("button", "", "remove");
        rm.type = "button";
        rm.addEventListener("click", async () => {
          await fetch(`/v1/alerts/${encodeURIComponent(s.id)}`, { method: "DELETE" });
          refreshAlerts();
        });
        li.appendChild(rm);
        return li;
      }));
      got.alerts.forEach(a => {
        const li = el("li");
        const b = el("button", "card alert", `“${a.query}”: ${a.video_id} ${mmss(a.start)}-${mmss(a.end)} ` +
          `(score ${a.score.toFixed(3)}, ${a.at})`);
        b.type = "button";
        const m = { ...a, video_url: `/videos/${encodeURIComponent(a.video_id)}` };
        b.addEventListener("click", () => play(m, b));
        li.appendChild(b);
        alertList.appendChild(li);
      });
      seenAlerts = got.total;
      alertsBox.hidden = !(got.searches.length || seenAlerts);
    } catch (e) { /* the server is away: try again at the next poll */ }
  }
  document.getElementById("save").addEventListener("click", async () => {
    const r = await fetch("/v1/alerts", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query: saving.dataset.query, min_score: Number(saveScore.value), k: 10 }) });
    const got = await r.json();
    status.textContent = r.ok ? `Saved: new videos matching “${got.query}” will show up under Alerts.`
                              : `Error: ${got.error}`;
    if (r.ok) { saving.hidden = true; refreshAlerts(); }
  });
  refreshAlerts();
  setInterval(refreshAlerts, 3000);

  const asked = new URLSearchParams(location.search);  // a link to a search: run it
  if (asked.get("q")) {
    q.value = asked.get("q");
    kInput.value = Math.min(100, Math.max(1, parseInt(asked.get("k"), 10) || 10));
    every.checked = asked.get("all") === "1";
    for (const id of Object.keys(fields)) {
      if (asked.get(id)) document.getElementById(id).value = asked.get(id);
    }
    if (Object.keys(fields).some(id => asked.get(id))) document.getElementById("filters").open = true;
    run({ query: q.value.trim() }, parseInt(kInput.value, 10), every.checked);
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.key === "/" && document.activeElement !== q) { ev.preventDefault(); q.focus(); q.select(); }
    if (ev.key === "Escape") player.pause();
  });
})();
