// The explorer's page: the controls, the numbers and the three panels, redrawn on every input
// event from the state mlp.js computes (mlp_ref/classroom/explorable.py writes this page; the
// window explorer draws the same panels with matplotlib: mlp_ref/plots/explorer.py).
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("mlp-ref-data").textContent);
  const mlpRef = window.mlpMath.explorer(data);
  window.mlpRef = mlpRef;
  const form = document.getElementById("controls");
  const $ = (id) => document.getElementById(id);
  const ROUNDOFF = data.roundoff;                      // measurements.fits.ROUNDOFF, 1e-12
  const ZERO_ROW = "zero", ROUNDOFF_ROW = "roundoff";  // plots/axes.py ZERO_FLOOR, ROUNDOFF_ROW

  // -- numbers as text (plots/axes.py drift_text, plots/style.py sci) ----------------------------
  const SUP = { "-": "\u207b", 0: "\u2070", 1: "\u00b9", 2: "\u00b2", 3: "\u00b3", 4: "\u2074",
                5: "\u2075", 6: "\u2076", 7: "\u2077", 8: "\u2078", 9: "\u2079" };
  const power = (k) => "10" + String(k).split("").map((c) => SUP[c]).join("");
  function sci(x) {
    const [m, e] = x.toExponential(2).split("e");
    return `${m.replace("-", "\u2212")}\u00d7${power(Number(e))}`;
  }
  function num(x, digits = 4) {           // a signed number, short
    if (!Number.isFinite(x)) return String(x);
    const a = Math.abs(x);
    const fixed = a >= 10 ** (digits - 1) ? x.toFixed(1) : x.toPrecision(digits);   // never 1.1e+3
    const text = a !== 0 && (a < 1e-3 || a >= 1e5) ? sci(x) : fixed.replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
    return (x > 0 ? "+" : "") + text.replace("-", "\u2212");
  }
  function driftText(value, held) {
    if (value === 0 && held) return "0 exactly";
    return value <= ROUNDOFF ? `round-off (\u2264 ${power(-12)})` : sci(value);
  }
  // placed: where a drift is drawn (plots/axes.py placed): exact zeros on their row (only when the
  // rule holds out1 by an identity), round-off (0 < |v| <= 1e-12, or a 0.0 of any other rule) on
  // the round-off row, the rest at their value
  function placed(value, held) {
    if (value === 0) return held ? ZERO_ROW : ROUNDOFF_ROW;
    return value <= ROUNDOFF ? ROUNDOFF_ROW : value;
  }
  const short = (x) => Number(x.toPrecision(3)).toString();

  // -- the controls ------------------------------------------------------------------------------
  for (const name of Object.keys(data.setups)) $("setup").add(new Option(name, name));   // the heading has the rest
  for (const fix of data.fixes) $("fix").add(new Option(fix, fix));
  const sliders = { lr: $("lr-slider"), lam: $("lam-slider"), steps: $("steps-slider") };
  for (const name of ["lr", "lam"]) {
    Object.assign(sliders[name], { min: data.ranges[name][0], max: data.ranges[name][1] });
  }
  Object.assign(sliders.steps, { min: data.ranges.steps[0], max: data.ranges.steps[1] });
  $("steps").min = data.ranges.steps[0];
  $("lr").value = data.setups[$("setup").value].lr;
  $("lam").value = data.penalty_lam;
  $("steps").value = 1;
  function syncSliders() {
    for (const name of ["lr", "lam"]) {
      const v = Number($(name).value);
      if (v > 0) sliders[name].value = Math.log10(v);
    }
    sliders.steps.value = $("steps").value;
  }
  // the log sliders set the number fields (their values are the quantities: form elements lr, lam)
  for (const name of ["lr", "lam"]) {
    sliders[name].addEventListener("input", (event) => {
      event.stopPropagation();
      $(name).value = short(10 ** Number(sliders[name].value));
      $(name).dispatchEvent(new Event("input", { bubbles: true }));
    });
    // up and down step lr and lam by a factor of 10^0.1 (a number field's own step is additive)
    $(name).addEventListener("keydown", (event) => {
      if (event.key !== "ArrowUp" && event.key !== "ArrowDown") return;
      event.preventDefault();
      const v = Number($(name).value) || 10 ** data.ranges[name][0];
      $(name).value = short(v * 10 ** (event.key === "ArrowUp" ? 0.1 : -0.1));
      $(name).dispatchEvent(new Event("input", { bubbles: true }));
    });
  }
  sliders.steps.addEventListener("input", (event) => {
    event.stopPropagation();
    $("steps").value = sliders.steps.value;
    $("steps").dispatchEvent(new Event("input", { bubbles: true }));
  });

  function settings() {
    const steps = Math.min(Math.max(Math.round(Number($("steps").value)) || 1, 1), 10000);
    const lr = Number($("lr").value), lam = Number($("lam").value);
    return { setup: $("setup").value, fix: $("fix").value, steps,
             lr: lr > 0 && Number.isFinite(lr) ? lr : null, lam: lam >= 0 && Number.isFinite(lam) ? lam : null };
  }

  // -- the work: every state is a trajectory advanced a slice of time at a time ----------------------
  // A long run (the visible setup's project+restore, 200 steps, takes a second on a phone) is
  // never done in one go: a redraw computes for at most SLICE ms (12), draws what it has (the heading
  // says how far it got), and the rest follows in further slices, so that the page always answers.
  const SLICE = 12;
  let current = null, pending = null;
  const runKey = (s) => [s.setup, s.fix, s.lr, s.fix === "penalty" ? s.lam : "-"].join("|");
  function advance(run, steps, until) {        // true when the state after ``steps`` is known
    while (run.taken < steps && performance.now() < until && run.advance());
    return run.taken >= steps || run.stopped;
  }

  // the drift curve: the same setup, fix, steps and lam at every lr of data.curve_lrs, kept per setting
  const curves = new Map();
  function curveKey(s) { return [s.setup, s.fix, s.steps, s.fix === "penalty" ? s.lam : "-"].join("|"); }
  function curveOf(s) {
    const key = curveKey(s);
    if (!curves.has(key)) curves.set(key, data.curve_lrs.map(() => ({ run: null, state: null })));
    return curves.get(key);
  }
  function work(s) {                           // one slice: the state first, then the curve's points
    const until = performance.now() + SLICE;
    if (current.state === null) {
      if (advance(current.run, s.steps, until)) current.state = current.run.at(s.steps);
      show(s);
    } else {
      const points = curveOf(s);
      for (const [i, p] of points.entries()) {
        if (p.state !== null) continue;
        p.run = p.run || mlpRef.trajectory({ ...s, lr: data.curve_lrs[i] });
        if (advance(p.run, s.steps, until)) { p.state = p.run.at(s.steps); p.run = null; }
        if (performance.now() >= until) break;
      }
      drawDrift(s, current.state);
    }
    const left = current.state === null || curveOf(s).some((p) => p.state === null);
    pending = left ? setTimeout(() => work(s), 0) : null;
  }

  // -- SVG helpers -----------------------------------------------------------------------------------
  const esc = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const text = (x, y, t, attrs = "") => `<text x="${x}" y="${y}" ${attrs}>${esc(t)}</text>`;
  const svg = (w, h, body) => `<svg viewBox="0 0 ${w} ${h}" xmlns="http://www.w3.org/2000/svg" aria-hidden="true" focusable="false">${body}</svg>`;
  function table(id, head, rows) {
    $(id).innerHTML = `<thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead>` +
      `<tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`).join("")}</tbody>`;
  }

  // -- panel 1: out2's and out1's change on every sample ---------------------------------------------
  function drawBars(st, held) {
    const n = st.delta.length / 2, W = 520, rowH = 96, left = 84;
    let body = "";
    [["out2", 1, "asked to rise"], ["out1", 0, "asked to stay"]].forEach(([name, k, asked], r) => {
      const y0 = 8 + r * (rowH + 20), mid = y0 + rowH / 2 + 8;
      const v = Array.from({ length: n }, (_, i) => st.delta[2 * i + k]);
      const top = Math.max(...v.map(Math.abs));
      const inBand = top <= ROUNDOFF;                 // round-off, or exactly 0: no bars of noise
      body += text(0, y0 + 12, `\u0394${name}`, 'font-weight="600"') + text(left, y0 + 12, asked, 'class="muted"');
      body += `<line class="axis" x1="${left}" x2="${W - 4}" y1="${mid}" y2="${mid}"/>`;
      if (inBand) {
        const what = top === 0 && held ? "0 exactly on every sample" :
          top === 0 ? "0.0 on every sample: round-off that cancelled" : `round-off on every sample (\u2264 ${power(-12)})`;
        body += text(left + 8, mid - 8, what, top === 0 && held ? 'class="zero" font-weight="600"' : 'class="muted"');
      } else {
        body += text(0, mid - rowH / 2 + 24, num(top, 3), 'class="muted"') + text(0, mid + rowH / 2 - 6, num(-top, 3), 'class="muted"');
        const slot = (W - left - 8) / n;
        v.forEach((x, i) => {
          const h = (Math.abs(x) / top) * (rowH / 2 - 10);
          body += `<rect class="${name}" x="${left + i * slot + slot * 0.2}" width="${slot * 0.6}" y="${x > 0 ? mid - h : mid}" height="${Math.max(h, 0.5)}"/>`;
        });
      }
    });
    body += text(left, 2 * rowH + 44, "sample 1 \u2026 " + n, 'class="muted"');
    $("bars").innerHTML = svg(W, 2 * rowH + 50, body);
    table("bars-table", ["sample", "\u0394out2", "\u0394out1"],
          Array.from({ length: n }, (_, i) => [i + 1, num(st.delta[2 * i + 1]), st.delta[2 * i] === 0 && held ? "0 exactly" : num(st.delta[2 * i])]));
  }

  // -- panel 2: out1's drift against lr, this lr ringed ------------------------------------------------
  function drawDrift(s, st) {
    const held = data.exact.includes(s.fix), points = curveOf(s).map((p) => p.state);
    const W = 520, H = 250, left = 86, right = W - 14, top = 12, bottom = H - 64;
    const known = points.filter((p) => p !== null);
    const values = [...known.map((p) => p.drift_batch), st.drift_batch].filter((v) => v > ROUNDOFF && Number.isFinite(v));
    const hiDecade = Math.max(0, Math.ceil(Math.log10(Math.max(1, ...values))));
    const loDecade = -12;
    const lrs = [...data.curve_lrs, s.lr];
    const xlo = Math.floor(Math.log10(Math.min(...lrs))), xhi = Math.ceil(Math.log10(Math.max(...lrs)));
    const X = (lr) => left + ((Math.log10(lr) - xlo) / (xhi - xlo)) * (right - left);
    const rowZero = H - 32, rowRoundoff = bottom + 15;         // the strip below the decades
    const Y = (v) => v === ZERO_ROW ? rowZero : v === ROUNDOFF_ROW ? rowRoundoff :
      top + ((hiDecade - Math.log10(v)) / (hiDecade - loDecade)) * (bottom - top);
    let body = `<rect class="band" x="${left}" width="${right - left}" y="${bottom + 5}" height="${rowZero - bottom - 13}"/>`;
    body += `<line class="axis" x1="${left}" x2="${left}" y1="${top}" y2="${bottom}"/>`;
    const every = Math.max(3, Math.ceil((hiDecade - loDecade) / 6));
    for (let k = hiDecade; k >= loDecade; k -= every) {
      body += `<line class="axis" x1="${left - 4}" x2="${left}" y1="${Y(10 ** k)}" y2="${Y(10 ** k)}"/>` +
              text(left - 6, Y(10 ** k) + 4, power(k), 'text-anchor="end"');
    }
    body += text(left - 6, rowRoundoff + 4, "round-off", 'text-anchor="end" class="muted"');
    body += `<line class="axis" x1="${left}" x2="${right}" y1="${rowZero}" y2="${rowZero}" stroke-dasharray="1 3"/>` +
            text(left - 6, rowZero + 4, "0 exactly", 'text-anchor="end" class="muted"');
    for (let k = xlo; k <= xhi; k++) body += text(X(10 ** k), H - 16, power(k), 'text-anchor="middle"');
    body += text((left + right) / 2, H - 2, "lr", 'text-anchor="middle"');
    const path = [];
    points.forEach((p, i) => {
      if (p === null) return;
      const x = X(data.curve_lrs[i]), y = Y(placed(p.drift_batch, held));
      path.push(`${path.length ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`);
      body += p.diverged ? `<path class="cross" d="M${x - 4},${y - 4}l8,8m0,-8l-8,8"/>` : `<circle class="point" cx="${x}" cy="${y}" r="3"/>`;
    });
    body = `<path class="curve" d="${path.join("")}"/>` + body;
    const where = placed(st.drift_batch, held), row = typeof where === "string" ? where : "value";
    body += `<circle class="ring" data-row="${row}" cx="${X(s.lr)}" cy="${Y(where)}" r="8"/>`;
    if (known.length < points.length) body += text(right, top + 12, `computing ${known.length} of ${points.length}\u2026`, 'text-anchor="end" class="muted"');
    if (known.some((p) => p.diverged)) body += text(right, top + 28, "\u00d7: diverged (the drift before it)", 'text-anchor="end" class="muted"');
    $("drift").innerHTML = svg(W, H, body);
    table("drift-table", ["lr", "max |\u0394out1|", "steps taken"],
          [...points.map((p, i) => [short(data.curve_lrs[i]), p ? driftText(p.drift_batch, held) : "computing",
                                     p ? `${p.taken} of ${s.steps}` : ""]),
           [`${short(s.lr)} (this lr)`, driftText(st.drift_batch, held), `${st.taken} of ${s.steps}`]]);
  }

  // -- panel 3: the network, with the weights and biases the steps moved ---------------------------
  function drawNetwork(st) {
    const sizes = st.sizes, L = sizes.length - 1, W = 520, H = 300, pad = 24;
    const x = (l) => pad + (l / L) * (W - 2 * pad - 40);
    const y = (l, j) => pad + ((j + 0.5) / sizes[l]) * (H - 2 * pad);
    let top = 0;
    for (const w of st.weights.W) for (const v of w) top = Math.max(top, v);
    let still = "", nodes = "";
    const moved = new Array(8).fill("");
    const rows = [];
    for (let l = 1; l <= L; l++) {
      const p = sizes[l - 1], q = sizes[l], w = st.weights.W[l - 1];
      let zeros = 0, largest = 0;
      for (let k = 0; k < p; k++) for (let j = 0; j < q; j++) {
        const v = w[k * q + j], seg = `M${x(l - 1).toFixed(1)},${y(l - 1, k).toFixed(1)}L${x(l).toFixed(1)},${y(l, j).toFixed(1)}`;
        largest = Math.max(largest, v);
        if (v === 0) { zeros++; still += seg; } else {   // eight shades of moved: eight paths, not 336
          moved[Math.min(7, Math.floor(8 * (top > 0 ? v / top : 0)))] += seg;
        }
      }
      const b = st.weights.b[l - 1];
      rows.push([`W${l}`, p * q, p * q - zeros, zeros, largest === 0 ? "0" : sci(largest).replace("\u00d7", " \u00d7 "),
                 `b${l}`, b.filter((v) => v !== 0).length + " of " + q, sci(Math.max(...b))]);
    }
    let btop = 0;
    for (const b of st.weights.b) for (const v of b) btop = Math.max(btop, v);
    for (let l = 0; l <= L; l++) for (let j = 0; j < sizes[l]; j++) {
      const v = l > 0 ? st.weights.b[l - 1][j] : 0, t = btop > 0 ? v / btop : 0;
      nodes += `<circle class="node" cx="${x(l)}" cy="${y(l, j)}" r="${Math.min(7, (H - 2 * pad) / sizes[l] / 2.4)}"` +
               (t > 0 ? ` style="fill: var(--out2); fill-opacity: ${(0.15 + 0.85 * t).toFixed(2)}"` : "") + "/>";
    }
    const labels = text(x(L) + 12, y(L, 0) + 4, "out1") + text(x(L) + 12, y(L, 1) + 4, "out2");
    const legend = text(pad, H - 4, "solid: moved (thicker: more); dotted: not moved, 0.0", 'class="muted"');
    const edges = moved.map((d, i) => d && `<path class="edge" d="${d}" stroke-width="${(0.6 + 0.4 * i).toFixed(1)}" ` +
                                          `stroke-opacity="${(0.3 + 0.1 * i).toFixed(1)}"/>`).join("");
    $("network").innerHTML = svg(W, H, `<path class="still" d="${still}"/>${edges}${nodes}${labels}${legend}`);
    table("network-table", ["layer", "weights", "moved", "not moved (0.0)", "max |\u0394w|", "biases", "moved", "max |\u0394b|"], rows);
  }

  // -- the heading, the numbers and the notes --------------------------------------------------------
  function describe(s, st, done) {
    const held = data.exact.includes(s.fix), setup = data.setups[s.setup];
    $("numbers").setAttribute("aria-busy", String(!done));
    if (!done) {
      $("heading").textContent = `computing: ${st.taken} of ${s.steps} steps of ${s.fix} at lr = ${short(s.lr)}\u2026`;
      $("taken").textContent = `computing step ${st.taken + 1} of ${s.steps}\u2026 (the numbers: after step ${st.taken})`;
      document.querySelector('[data-measure="gain"]').textContent = num(st.gain);
      document.querySelector('[data-measure="drift_batch"]').textContent = driftText(st.drift_batch, held);
      return;
    }
    const lam = s.fix === "penalty" ? `, \u03bb = ${short(s.lam)}` : "";
    const steps = `${st.taken} step${st.taken === 1 ? "" : "s"}`;
    $("heading").textContent = `${steps} of ${s.fix} at lr = ${short(s.lr)}${lam}, ${setup.label}, G = [0, \u22121]` +
      (st.diverged ? ` (of ${s.steps} asked: diverged at step ${st.taken + 1})` : "");
    document.querySelector('[data-measure="gain"]').textContent = num(st.gain);
    document.querySelector('[data-measure="drift_batch"]').textContent = driftText(st.drift_batch, held);
    $("taken").textContent = st.diverged
      ? `Diverged at step ${st.taken + 1} of ${s.steps}: that step overflowed, so the numbers are those after step ${st.taken}.`
      : `${st.taken} of ${s.steps} step${s.steps === 1 ? "" : "s"} taken.`;
    const notes = [];
    if (s.fix === "penalty" && s.lr * s.lam > setup.penalty_limit) {
      notes.push(`lr \u00b7 \u03bb = ${short(s.lr * s.lam)} is past the penalty's stability limit 2 / \u03bbmax(J\u2081J\u2081\u1d40) = ` +
                 `${short(setup.penalty_limit)} (fixes.penalty_limit, at the start): its pull on out1 overshoots, and the drift grows instead of shrinking.`);
    }
    if (st.unrestored) {
      notes.push(`Gauss-Newton restoring did not converge at step ${st.unrestored} (20 iterations; fixes.restore ` +
                 "reports it NOT converged): out1 is not held there, and the state depends on the last bits of the " +
                 "arithmetic, so another machine's may differ.");
    }
    $("warning").hidden = notes.length === 0;
    $("warning").textContent = notes.join(" ");
  }

  function invalid(s) {
    const bad = s.lr === null ? "lr: expected a positive number" : s.lam === null ? "\u03bb: expected a number \u2265 0" : "";
    $("warning").hidden = !bad;
    $("warning").textContent = bad;
    return bad;
  }

  // -- a redraw: the state the controls name (as far as one slice gets), then the rest ----------------
  function show(s) {
    const run = current.run, done = current.state !== null;
    const st = done ? current.state : run.at(run.taken);
    describe(s, st, done);
    drawBars(st, data.exact.includes(s.fix));
    drawDrift(s, st);
    drawNetwork(st);
  }
  function redraw() {
    const t0 = performance.now();
    const s = settings();
    clearTimeout(pending);
    if (invalid(s)) return;
    if (current === null || current.key !== runKey(s)) {
      current = { key: runKey(s), run: mlpRef.trajectory(s), state: null };
    }
    current.state = null;
    if (advance(current.run, s.steps, t0 + SLICE)) current.state = current.run.at(s.steps);
    show(s);
    syncSliders();
    mlpRef.lastRedraw = { settings: s, ms: performance.now() - t0, complete: current.state !== null };
    pending = setTimeout(() => work(s), 0);
  }
  form.addEventListener("input", redraw);
  form.addEventListener("submit", (event) => event.preventDefault());
  redraw();
  // one step of every fix on every setup, one at a time while the page is idle: the browser
  // compiles each function on its first use, which would otherwise fall in a reader's first change
  const warm = Object.keys(data.setups).flatMap((setup) => data.fixes.map((fix) => ({ setup, fix, lr: 0.01, steps: 1 })));
  (function warmUp() {
    if (warm.length) setTimeout(() => { mlpRef.state(warm.pop()); warmUp(); }, 20);
    else mlpRef.warmed = true;
  })();
})();
