// The Occurrences page's scatter (issue 34): a hand-written WebGL point cloud as a Streamlit v2 component.
// Python sends one binary payload (occurrence_figures.scatter_payload): "NVSC", a uint32 header length, a JSON
// header, then float32 x,y pairs, uint8 r,g,b triples and the searched token's float32 x,y pairs.
// gl.POINTS, one draw call for every point (no antialiasing), one for the searched ones on top, larger.
// Drag pans, the wheel zooms around the cursor; shift+drag (or the Box tool) draws a box, alt/ctrl+drag
// (or the Lasso tool) a lasso: both go back to Python as a trigger "selection" in data coordinates;
// a click picks the nearest point within 8 px (a CPU search) and sets the state "picked" to
// {index, x, y} (its coordinates tell Python whether the index still means that point).
// Nothing is fetched. The host element carries data-points, data-highlight and data-view for tests.
const STATE = new WeakMap(); // per Streamlit container: the GL objects and the view survive reruns
const PICK_PX = 8;
const MOVING_MAX = 250000; // while a pan or zoom goes on, at most this many points a frame (every k-th);
const SETTLE_MS = 200;     // every point again once the view has been still this long
const LASSO_MAX = 100;     // vertices of a lasso at most (DuckDB: ~0.4 s over 1M points at 100 edges, 2.8 s at 300)

const VS = `attribute vec2 a_xy; attribute vec3 a_rgb; uniform vec2 u_c; uniform vec2 u_k; uniform float u_size;
varying vec3 v_rgb;
void main() { gl_Position = vec4((a_xy - u_c) * u_k, 0.0, 1.0); gl_PointSize = u_size; v_rgb = a_rgb; }`;
const FS = `precision mediump float; varying vec3 v_rgb; void main() { gl_FragColor = vec4(v_rgb, 1.0); }`;

function shader(gl, type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}

function setup(root) {
  // the DOM: a toolbar, the GL canvas and a 2D canvas on top for the box, the lasso and the selection
  const host = document.createElement("div");
  host.className = "nv-scatter";
  host.innerHTML = `<div class="nv-tools"><button data-mode="pan">Pan</button><button data-mode="box">Box</button>
    <button data-mode="lasso">Lasso</button><button data-act="reset">Reset view</button>
    <button data-act="clear">Clear selection</button><span class="nv-hint">drag: pan · wheel: zoom ·
    shift+drag: box · alt+drag: lasso · click: a point</span></div>
    <div class="nv-stage"><canvas class="nv-gl"></canvas><canvas class="nv-ink"></canvas></div>`;
  root.appendChild(host);
  const canvas = host.querySelector(".nv-gl");
  const gl = canvas.getContext("webgl", { antialias: false, preserveDrawingBuffer: true, alpha: false });
  const prog = gl.createProgram();
  gl.attachShader(prog, shader(gl, gl.VERTEX_SHADER, VS));
  gl.attachShader(prog, shader(gl, gl.FRAGMENT_SHADER, FS));
  gl.linkProgram(prog);
  gl.useProgram(prog);
  const at = (n) => gl.getAttribLocation(prog, n), un = (n) => gl.getUniformLocation(prog, n);
  return { host, canvas, ink: host.querySelector(".nv-ink"), gl, prog, a_xy: at("a_xy"), a_rgb: at("a_rgb"),
           u_c: un("u_c"), u_k: un("u_k"), u_size: un("u_size"), bxy: gl.createBuffer(), brgb: gl.createBuffer(),
           bhi: gl.createBuffer(), n: 0, h: 0, key: null, frame: null, view: null, mode: "pan", drag: null,
           draws: [], W: 1, H: 1 };
}

function load(s, bytes) {
  // parse the payload; the points go to the GPU only when their key (a digest made in Python) changed
  const u8 = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const len = dv.getUint32(4, true);
  const head = JSON.parse(new TextDecoder().decode(u8.subarray(8, 8 + len)));
  let at = 8 + len + ((4 - (len % 4)) % 4);
  const f32 = (count) => { const a = new Float32Array(count); new Uint8Array(a.buffer).set(u8.subarray(at, at + 4 * count)); at += 4 * count; return a; };
  const gl = s.gl;
  if (head.key !== s.key) {
    s.xy = f32(2 * head.n);
    const rgb = u8.slice(at, at + 3 * head.n);
    gl.bindBuffer(gl.ARRAY_BUFFER, s.bxy); gl.bufferData(gl.ARRAY_BUFFER, s.xy, gl.STATIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, s.brgb); gl.bufferData(gl.ARRAY_BUFFER, rgb, gl.STATIC_DRAW);
    s.key = head.key; s.n = head.n;
  } else at += 8 * head.n;
  at += 3 * head.n + ((4 - ((3 * head.n) % 4)) % 4);
  const hi = f32(2 * head.h);
  gl.bindBuffer(gl.ARRAY_BUFFER, s.bhi); gl.bufferData(gl.ARRAY_BUFFER, hi, gl.STATIC_DRAW);
  s.h = head.h; s.shape = head.shape; s.height = head.height || 620;
  if (JSON.stringify(head.frame) !== JSON.stringify(s.frame)) { s.frame = head.frame; s.view = null; }
  s.host.dataset.points = String(s.xy.length / 2);
  s.host.dataset.bytes = String(u8.byteLength);
  s.host.dataset.highlight = String(s.h);
}

function fit(s) {
  // the view: centre (cx, cy) and pixels per data unit, framing the points' 0.5-99.5 % range
  const [x0, x1, y0, y1] = s.frame;
  s.view = { cx: (x0 + x1) / 2, cy: (y0 + y1) / 2,
             ppu: Math.min(s.W / Math.max(x1 - x0, 1e-9), s.H / Math.max(y1 - y0, 1e-9)) / 1.15 };
}

const toData = (s, px, py) => [s.view.cx + (px - s.W / 2) / s.view.ppu, s.view.cy - (py - s.H / 2) / s.view.ppu];
const toPx = (s, x, y) => [s.W / 2 + (x - s.view.cx) * s.view.ppu, s.H / 2 - (y - s.view.cy) * s.view.ppu];

function resize(s) {
  const dpr = window.devicePixelRatio || 1;
  s.W = Math.max(1, s.host.clientWidth); s.H = s.height;
  for (const c of [s.canvas, s.ink]) { // (a canvas given its own size again would be cleared: a flash)
    if (c.width !== Math.round(s.W * dpr)) c.width = Math.round(s.W * dpr);
    if (c.height !== Math.round(s.H * dpr)) c.height = Math.round(s.H * dpr);
    c.style.width = s.W + "px"; c.style.height = s.H + "px";
  }
  s.dpr = dpr;
}

function draw(s) {
  // one frame: every point, then the searched ones; window.__nvTimed makes each frame wait for the GPU
  const t0 = performance.now(), gl = s.gl;
  if (!s.view) fit(s);
  gl.viewport(0, 0, s.canvas.width, s.canvas.height);
  gl.clearColor(1, 1, 1, 1); gl.clear(gl.COLOR_BUFFER_BIT);
  gl.uniform2f(s.u_c, s.view.cx, s.view.cy);
  gl.uniform2f(s.u_k, 2 * s.view.ppu / s.W, 2 * s.view.ppu / s.H);
  const px = s.px || Math.max(1, Math.min(3, Math.round(2 * s.dpr))); // s.px: the benchmark's override
  gl.uniform1f(s.u_size, px);
  // moving: every k-th point (strided attributes, no copy), software WebGL takes ~0.6 us a point (README)
  const k = s.moving && s.n > MOVING_MAX ? Math.min(31, Math.ceil(s.n / MOVING_MAX)) : 1;
  gl.bindBuffer(gl.ARRAY_BUFFER, s.bxy); gl.enableVertexAttribArray(s.a_xy);
  gl.vertexAttribPointer(s.a_xy, 2, gl.FLOAT, false, 8 * k, 0);
  gl.bindBuffer(gl.ARRAY_BUFFER, s.brgb); gl.enableVertexAttribArray(s.a_rgb);
  gl.vertexAttribPointer(s.a_rgb, 3, gl.UNSIGNED_BYTE, true, 3 * k, 0);
  gl.drawArrays(gl.POINTS, 0, Math.ceil(s.n / k));
  s.host.dataset.drawn = String(Math.ceil(s.n / k));
  if (s.h) { // the searched token: black, larger, a constant colour instead of the rgb buffer
    gl.disableVertexAttribArray(s.a_rgb); gl.vertexAttrib3f(s.a_rgb, 0, 0, 0);
    gl.bindBuffer(gl.ARRAY_BUFFER, s.bhi); gl.vertexAttribPointer(s.a_xy, 2, gl.FLOAT, false, 0, 0);
    gl.uniform1f(s.u_size, 2.5 * px); gl.drawArrays(gl.POINTS, 0, s.h);
  }
  if (window.__nvTimed) { gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, new Uint8Array(4)); s.draws.push(performance.now() - t0); }
  ink(s);
  s.host.dataset.view = JSON.stringify({ cx: s.view.cx, cy: s.view.cy, ppu: s.view.ppu, W: s.W, H: s.H });
  s.host.dataset.frames = String((+s.host.dataset.frames || 0) + 1);
}

function ink(s) {
  // the 2D layer: the selection Python holds (dashed), the box or lasso being drawn (solid)
  const c = s.ink.getContext("2d");
  c.setTransform(s.dpr, 0, 0, s.dpr, 0, 0); c.clearRect(0, 0, s.W, s.H);
  const path = (pts, dash) => {
    if (!pts || pts.length < 2) return;
    c.beginPath(); c.setLineDash(dash); c.lineWidth = 1.5; c.strokeStyle = "#000";
    pts.forEach(([x, y], i) => (i ? c.lineTo(x, y) : c.moveTo(x, y))); c.closePath(); c.stroke();
  };
  if (s.shape) path(s.shape.map(([x, y]) => toPx(s, x, y)), [5, 4]);
  if (s.drag && s.drag.mode !== "pan") path(s.drag.pts, []);
}

let queued = new Set();
function moved(s) { // the view moves: cheap frames now, every point once it has been still SETTLE_MS
  s.moving = true;
  clearTimeout(s.settle);
  s.settle = setTimeout(() => { s.moving = false; redraw(s); }, SETTLE_MS);
  redraw(s);
}
function redraw(s) { // at most one frame per animation frame
  if (queued.has(s)) return;
  queued.add(s);
  requestAnimationFrame(() => { queued.delete(s); draw(s); });
}

function nearest(s, px, py) {
  // the index of the point nearest to the pixel (px, py) within PICK_PX, or -1: a CPU pass over the buffer
  const [x, y] = toData(s, px, py), r = PICK_PX / s.view.ppu, xy = s.xy;
  let best = -1, bd = r * r;
  for (let i = 0; i < s.n; i++) {
    const dx = xy[2 * i] - x, dy = xy[2 * i + 1] - y, d = dx * dx + dy * dy;
    if (d < bd) { bd = d; best = i; }
  }
  return best;
}

function listen(s, signal, component) {
  const api = { // what goes back to Python, also kept on the host element (data-picked, data-selection) for tests
    setStateValue: (k, v) => { s.host.dataset.picked = JSON.stringify(v); component.setStateValue(k, v); },
    setTriggerValue: (k, v) => { s.host.dataset.selection = JSON.stringify(v); component.setTriggerValue(k, v); },
  };
  const on = (el, ev, f, opt = {}) => el.addEventListener(ev, f, { signal, ...opt });
  const local = (e) => { const r = s.ink.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  s.host.querySelectorAll("button[data-mode]").forEach((b) => {
    b.classList.toggle("on", b.dataset.mode === s.mode);
    on(b, "click", () => { s.mode = b.dataset.mode; s.host.querySelectorAll("button[data-mode]").forEach((o) => o.classList.toggle("on", o === b)); });
  });
  on(s.host.querySelector("[data-act=reset]"), "click", () => { fit(s); redraw(s); });
  on(s.host.querySelector("[data-act=clear]"), "click", () => api.setTriggerValue("selection", { kind: "clear" }));
  on(s.ink, "pointerdown", (e) => {
    const mode = e.shiftKey ? "box" : (e.altKey || e.ctrlKey) ? "lasso" : s.mode;
    s.drag = { mode, start: local(e), last: local(e), pts: [local(e)], moved: 0 };
    s.ink.setPointerCapture(e.pointerId);
  });
  on(s.ink, "pointermove", (e) => {
    const d = s.drag; if (!d) return;
    const p = local(e);
    d.moved = Math.max(d.moved, Math.hypot(p[0] - d.start[0], p[1] - d.start[1]));
    if (d.mode === "pan") { s.view.cx -= (p[0] - d.last[0]) / s.view.ppu; s.view.cy += (p[1] - d.last[1]) / s.view.ppu; moved(s); }
    else if (d.mode === "box") d.pts = [d.start, [p[0], d.start[1]], p, [d.start[0], p[1]]];
    else if (Math.hypot(p[0] - d.last[0], p[1] - d.last[1]) >= 6) d.pts.push(p);
    if (d.mode !== "lasso" || d.pts[d.pts.length - 1] === p) d.last = p;
    redraw(s);
  });
  on(s.ink, "pointerup", (e) => {
    const d = s.drag; s.drag = null; if (!d) return;
    if (d.moved < 3) { // a click: the nearest point
      const i = nearest(s, ...local(e));
      if (i >= 0) api.setStateValue("picked", { index: i, x: s.xy[2 * i], y: s.xy[2 * i + 1] });
    } else if (d.mode === "box") {
      const [a, b] = [toData(s, ...d.start), toData(s, ...local(e))];
      api.setTriggerValue("selection", { kind: "box", x: [a[0], b[0]].sort((u, v) => u - v), y: [a[1], b[1]].sort((u, v) => u - v) });
    } else if (d.mode === "lasso" && d.pts.length >= 3) {
      const step = Math.ceil(d.pts.length / LASSO_MAX); // every step-th vertex: the SQL has one term an edge
      const pts = d.pts.filter((_, i) => i % step === 0);
      api.setTriggerValue("selection", { kind: "lasso", polygon: pts.map(([x, y]) => toData(s, x, y)) });
    }
    redraw(s);
  });
  on(s.ink, "wheel", (e) => { // zoom around the cursor: the data point under it stays there
    e.preventDefault();
    const [px, py] = local(e), [x, y] = toData(s, px, py);
    s.view.ppu *= Math.exp(-e.deltaY * 0.0015);
    s.view.cx = x - (px - s.W / 2) / s.view.ppu; s.view.cy = y + (py - s.H / 2) / s.view.ppu;
    moved(s);
  }, { passive: false });
  const ro = new ResizeObserver(() => { resize(s); redraw(s); });
  ro.observe(s.host);
  signal.addEventListener("abort", () => ro.disconnect());
}

export default function (component) {
  const { data, parentElement } = component;
  let s = STATE.get(parentElement);
  if (!s) { s = setup(parentElement); STATE.set(parentElement, s); }
  s.host.__nv = s; // for the tests and the benchmark: frame times (s.draws), the view, a frame now
  s.drawNow = () => draw(s);
  load(s, data);
  resize(s);
  // Streamlit calls the returned cleanup only when the component leaves the page, not before calling this
  // function again on a rerun: drop the previous listeners here, or they pile up (k wheel zooms a notch)
  if (s.ctl) s.ctl.abort();
  const ctl = s.ctl = new AbortController();
  listen(s, ctl.signal, component);
  redraw(s);
  return () => ctl.abort();
}
