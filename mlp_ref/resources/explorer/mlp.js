// mlp-ref's mathematics, transcribed into JavaScript for the explorer's page.
//
// This file is a TRANSCRIPTION, not a second reference: the package (mlp_ref/, NumPy) is the
// reference, and tests/test_explore.py checks this code against it, in Node and in Chromium, at
// random settings. Every function names its Python counterpart; the formulas are the same, in
// the same order, with plain loops where NumPy has matrix products (so the last bits may differ:
// the tests bound by how much). Everything is float64, as in the package.
//
// A network is {sizes, acts, W, b}: W[l - 1] is W_l, an (n_{l-1} x n_l) matrix stored row by row
// in a Float64Array, b[l - 1] is b_l; acts[l - 1] names f_l. X is an (n x d) matrix the same way.
// Output column 0 is out1, column 1 is out2 (mlp_ref/setups.py OUT1, OUT2).
(function (root) {
  "use strict";

  // -- activations (mlp_ref/activations.py) ------------------------------------------------------
  // sigmoid: 1 / (1 + e) for z >= 0 and e / (1 + e) for z < 0, e = exp(-|z|): no overflow.
  function sigmoid(z) {
    const e = Math.exp(-Math.abs(z));
    return z >= 0 ? 1 / (1 + e) : e / (1 + e);
  }
  // f and f' in terms of the output a (sigmoid' = a (1 - a), tanh' = 1 - a^2, identity' = 1)
  const ACTIVATIONS = {
    sigmoid: { f: sigmoid, df: (a) => a * (1 - a) },
    tanh: { f: Math.tanh, df: (a) => 1 - a * a },
    identity: { f: (z) => z, df: () => 1 },
  };

  function allFinite(arrays) {
    for (const v of arrays) for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i])) return false;
    return true;
  }

  // -- the network (mlp_ref/network.py) ----------------------------------------------------------
  // MLP.copy: an independent copy of the parameters
  function copy(net) {
    return { sizes: net.sizes, acts: net.acts, W: net.W.map((w) => Float64Array.from(w)),
             b: net.b.map((v) => Float64Array.from(v)) };
  }

  // MLP.forward: z_l = a_{l-1} @ W_l + b_l, a_l = f_l(z_l); returns {a, z} (a[0] = X) or null
  // when the output is not finite (where MLP.forward raises forward_overflow). A network's
  // parameters never change here (a step makes a new network), so its record on the batch is kept.
  function forward(net, X, n) {
    if (net.record === undefined || net.recordX !== X) {
      net.record = forwardPass(net, X, n);
      net.recordX = X;
    }
    return net.record;
  }
  function forwardPass(net, X, n) {
    const a = [X], z = [null];
    for (let l = 1; l < net.sizes.length; l++) {
      const p = net.sizes[l - 1], q = net.sizes[l], W = net.W[l - 1], bias = net.b[l - 1];
      const f = ACTIVATIONS[net.acts[l - 1]].f, prev = a[l - 1];
      const zl = new Float64Array(n * q), al = new Float64Array(n * q);
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < q; j++) {
          let s = 0;
          for (let k = 0; k < p; k++) s += prev[i * p + k] * W[k * q + j];
          zl[i * q + j] = s + bias[j];
          al[i * q + j] = f(zl[i * q + j]);
        }
      }
      z.push(zl);
      a.push(al);
    }
    return allFinite([a[a.length - 1]]) ? { a, z } : null;
  }

  // MLP.backward: dz_l = da_l * f_l'(a_l), dW_l = a_{l-1}^T dz_l, db_l = sum_i dz_l,
  // da_{l-1} = dz_l W_l^T, from dout = G (n x K). Returns {W, b} like the parameters, or null where
  // MLP.backward raises backward_overflow (a gradient or da_0 not finite).
  function backward(net, record, G, n) {
    const L = net.sizes.length - 1, W = new Array(L), b = new Array(L);
    let da = G;
    for (let l = L; l >= 1; l--) {
      const p = net.sizes[l - 1], q = net.sizes[l], df = ACTIVATIONS[net.acts[l - 1]].df;
      const al = record.a[l], prev = record.a[l - 1], Wl = net.W[l - 1];
      const dz = new Float64Array(n * q);
      for (let c = 0; c < n * q; c++) dz[c] = da[c] * df(al[c]);
      const dW = new Float64Array(p * q), db = new Float64Array(q), dprev = new Float64Array(n * p);
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < q; j++) {
          const d = dz[i * q + j];
          db[j] += d;
          for (let k = 0; k < p; k++) {
            dW[k * q + j] += prev[i * p + k] * d;
            dprev[i * p + k] += d * Wl[k * q + j];
          }
        }
      }
      W[l - 1] = dW;
      b[l - 1] = db;
      da = dprev;
    }
    return allFinite([...W, ...b, da]) ? { W, b } : null;
  }

  // Model.gradient: forward, then backward; G is (K,) for every row (broadcast) or (n x K)
  function gradient(net, X, n, G) {
    const record = forward(net, X, n);
    if (record === null) return null;
    const K = net.sizes[net.sizes.length - 1];
    const Gfull = G.length === K && n > 1 ? rows(G, n) : Float64Array.from(G);
    return backward(net, record, Gfull, n);
  }

  function rows(v, n) {                 // v (K,) as the (n x K) matrix of n equal rows
    const out = new Float64Array(n * v.length);
    for (let i = 0; i < n; i++) out.set(v, i * v.length);
    return out;
  }

  // Model.step: theta <- theta - lr * D; returns the new network, or null where Model.step raises
  // step_overflow (a new value not finite)
  function step(net, D, lr) {
    const out = copy(net);
    for (let l = 0; l < net.W.length; l++) {
      for (let i = 0; i < out.W[l].length; i++) out.W[l][i] = net.W[l][i] - lr * D.W[l][i];
      for (let i = 0; i < out.b[l].length; i++) out.b[l][i] = net.b[l][i] - lr * D.b[l][i];
    }
    return allFinite([...out.W, ...out.b]) ? out : null;
  }

  // -- the Jacobian of out1 on X (mlp_ref/jacobian.py OutputJacobian, keep = [0]) --------------------
  // The signals S_l[i] = d out1_i / d z_l (backpropagated from e_0, as jacobian.py's signals), and
  // J's row i: d out1_i / d theta = (outer(a_{l-1, i}, S_l[i]), S_l[i]) for every layer. J is built
  // here (m x P, m = n rows, one per sample): jacobian.py never builds it (its ``gram``,
  // ``matvec``, ``rmatvec`` work from the signals), but at 26 and 354 parameters it costs nothing.
  function jacobian(net, record, n) {
    const L = net.sizes.length - 1;
    const offsets = [];                 // where W_l and b_l start in a row (jacobian.flatten's order)
    let P = 0;
    for (let l = 1; l <= L; l++) {
      offsets.push([P, P + net.sizes[l - 1] * net.sizes[l]]);
      P += net.sizes[l - 1] * net.sizes[l] + net.sizes[l];
    }
    const J = new Float64Array(n * P);
    for (let i = 0; i < n; i++) {
      let S = new Float64Array(net.sizes[L]);
      S[0] = 1;                                                  // d out1 / d a_L = e_0
      for (let l = L; l >= 1; l--) {
        const p = net.sizes[l - 1], q = net.sizes[l], df = ACTIVATIONS[net.acts[l - 1]].df;
        const dz = new Float64Array(q);
        for (let j = 0; j < q; j++) dz[j] = S[j] * df(record.a[l][i * q + j]);   // S_l[i]
        const [w0, b0] = offsets[l - 1];
        for (let k = 0; k < p; k++) {
          const ak = record.a[l - 1][i * p + k];
          for (let j = 0; j < q; j++) J[i * P + w0 + k * q + j] = ak * dz[j];
        }
        for (let j = 0; j < q; j++) J[i * P + b0 + j] = dz[j];
        const Wl = net.W[l - 1], next = new Float64Array(p);
        for (let k = 0; k < p; k++) {
          let s = 0;
          for (let j = 0; j < q; j++) s += dz[j] * Wl[k * q + j];
          next[k] = s;
        }
        S = next;
      }
    }
    return { J, m: n, P, offsets };
  }

  // jacobian.flatten / unflatten: a direction {W, b} as one vector in J's column order, and back
  function flatten(net, D) {
    const parts = [];
    for (let l = 0; l < net.W.length; l++) parts.push(D.W[l], D.b[l]);
    const out = new Float64Array(parts.reduce((s, v) => s + v.length, 0));
    let at = 0;
    for (const v of parts) { out.set(v, at); at += v.length; }
    return out;
  }
  function unflatten(net, v) {
    const W = [], b = [];
    let at = 0;
    for (let l = 0; l < net.W.length; l++) {
      W.push(v.slice(at, at + net.W[l].length)); at += net.W[l].length;
      b.push(v.slice(at, at + net.b[l].length)); at += net.b[l].length;
    }
    return { W, b };
  }

  // OutputJacobian.gram: J J^T (m x m)
  function gram(Jac) {
    const { J, m, P } = Jac, out = new Float64Array(m * m);
    for (let r = 0; r < m; r++) {
      for (let c = 0; c <= r; c++) {
        let s = 0;
        for (let k = 0; k < P; k++) s += J[r * P + k] * J[c * P + k];
        out[r * m + c] = out[c * m + r] = s;
      }
    }
    return out;
  }
  // OutputJacobian.matvec: J . v (m,) and rmatvec: J^T alpha (P,)
  function matvec(Jac, v) {
    const { J, m, P } = Jac, out = new Float64Array(m);
    for (let r = 0; r < m; r++) { let s = 0; for (let k = 0; k < P; k++) s += J[r * P + k] * v[k]; out[r] = s; }
    return out;
  }
  function rmatvec(Jac, alpha) {
    const { J, m, P } = Jac, out = new Float64Array(P);
    for (let r = 0; r < m; r++) for (let k = 0; k < P; k++) out[k] += alpha[r] * J[r * P + k];
    return out;
  }

  // -- the pseudo-inverse of the Gram (mlp_ref/pseudoinverse.py GramSolver) ---------------------------
  // gram = V diag(lam) V^T. The package takes it from LAPACK (np.linalg.eigh); here the cyclic
  // Jacobi method, which for a symmetric positive semi-definite matrix finds even the small
  // eigenvalues to high relative accuracy (Demmel and Veselic, 1992). Rotations run until no
  // off-diagonal entry is above eps times the geometric mean of its two diagonal entries.
  const EPS = 2.220446049250313e-16;           // np.finfo(float64).eps
  const TINY = 2.2250738585072014e-308;        // np.finfo(float64).tiny, the smallest normal number
  function eigh(A0, m) {
    const A = Float64Array.from(A0), V = new Float64Array(m * m);
    for (let i = 0; i < m; i++) V[i * m + i] = 1;
    for (let sweep = 0; sweep < 60; sweep++) {
      let rotated = false;
      for (let p = 0; p < m - 1; p++) {
        for (let q = p + 1; q < m; q++) {
          const apq = A[p * m + q], app = A[p * m + p], aqq = A[q * m + q];
          if (apq === 0 || Math.abs(apq) <= EPS * Math.sqrt(Math.abs(app * aqq))) continue;
          rotated = true;
          const theta = (aqq - app) / (2 * apq);
          const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(1 + theta * theta));
          const c = 1 / Math.sqrt(1 + t * t), s = t * c;
          for (let k = 0; k < m; k++) {          // A <- A R (columns p and q)
            const akp = A[k * m + p], akq = A[k * m + q];
            A[k * m + p] = c * akp - s * akq;
            A[k * m + q] = s * akp + c * akq;
          }
          for (let k = 0; k < m; k++) {          // A <- R^T A (rows p and q)
            const apk = A[p * m + k], aqk = A[q * m + k];
            A[p * m + k] = c * apk - s * aqk;
            A[q * m + k] = s * apk + c * aqk;
          }
          A[p * m + q] = A[q * m + p] = 0;
          for (let k = 0; k < m; k++) {          // V <- V R
            const vkp = V[k * m + p], vkq = V[k * m + q];
            V[k * m + p] = c * vkp - s * vkq;
            V[k * m + q] = s * vkp + c * vkq;
          }
        }
      }
      if (!rotated) break;
    }
    const order = [...Array(m).keys()].sort((i, j) => A[i * m + i] - A[j * m + j]);   // ascending, as eigh
    const lam = new Float64Array(m), Vs = new Float64Array(m * m);
    order.forEach((from, to) => {
      lam[to] = A[from * m + from];
      for (let k = 0; k < m; k++) Vs[k * m + to] = V[k * m + from];
    });
    return { lam, V: Vs };
  }

  // GramSolver(gram, rcond=None): rcond = m eps (pseudoinverse.default_rcond); the eigenvalues
  // above max(rcond * lam_max, tiny) are inverted, the rest count as exactly zero
  // (pseudoinverse.kept_eigenvalues). solve(rhs) = V diag(inv) V^T rhs.
  function gramSolver(G, m) {
    const { lam, V } = eigh(G, m);
    const rcond = Math.max(m, 1) * EPS, top = lam[m - 1];
    const inv = new Float64Array(m);
    let rank = 0;
    for (let i = 0; i < m; i++) {
      if (top > 0 && lam[i] > Math.max(rcond * top, TINY)) { inv[i] = 1 / lam[i]; rank++; }
    }
    function solve(rhs) {
      const t = new Float64Array(m), out = new Float64Array(m);
      for (let j = 0; j < m; j++) { let s = 0; for (let i = 0; i < m; i++) s += V[i * m + j] * rhs[i]; t[j] = inv[j] * s; }
      for (let i = 0; i < m; i++) { let s = 0; for (let j = 0; j < m; j++) s += V[i * m + j] * t[j]; out[i] = s; }
      return out;
    }
    return { solve, lam, rank };
  }

  // -- the fixes (mlp_ref/fixes.py), as the explorer's rules (mlp_ref/measurements/rules.py) -----------
  // Each returns the direction D {W, b} of a step theta <- theta - lr D, or null where the package
  // raises (an overflow: the state is then diverged at this step). G is the question's [0, -1].
  const G_QUESTION = Float64Array.from([0, -1]);        // setups.G_QUESTION
  const MASK = Float64Array.from([0, 1]);                // rules.MASK

  // fixes.naive: the plain gradient g = sum_i J_i^T G_i
  function naive(net, X, n) { return gradient(net, X, n, G_QUESTION); }

  // fixes.masked(mask = [0, 1]): the gradient of mask * G (G's out1 column is already 0: = naive)
  function masked(net, X, n) { return gradient(net, X, n, G_QUESTION.map((g, k) => g * MASK[k])); }

  // fixes.freeze(trainable = the output layer's W_L, b_L): the gradient, every other parameter zeroed
  function freeze(net, X, n) {
    const g = gradient(net, X, n, G_QUESTION);
    if (g === null) return null;
    const L = net.W.length;
    return { W: g.W.map((v, l) => (l === L - 1 ? v : new Float64Array(v.length))),
             b: g.b.map((v, l) => (l === L - 1 ? v : new Float64Array(v.length))) };
  }

  // fixes.project(keep = [0], keep_X = X, refine = 1) -> fixes.nullspace: with J out1's Jacobian
  // on X, D <- D - J^T (J J^T)^+ J D, once and then once more (the refinement pass), from D = g
  function project(net, X, n) {
    const g = gradient(net, X, n, G_QUESTION);
    if (g === null) return null;
    const record = forward(net, X, n), Jac = jacobian(net, record, n);
    const G = gram(Jac);
    if (!allFinite([G])) return null;                   // fixes.nullspace: gram_overflow
    const { solve } = gramSolver(G, n);
    let D = flatten(net, g);
    for (let pass = 0; pass < 2; pass++) {              // range(1 + refine)
      const alpha = solve(matvec(Jac, D));              // (J J^T)^+ J D
      const back = rmatvec(Jac, alpha);                 // J^T alpha
      D = D.map((d, k) => d - back[k]);
    }
    return allFinite([D]) ? unflatten(net, D) : null;   // fixes.nullspace: too_large
  }

  // fixes.penalty(keep = [0], ref, lam): the gradient with G's out1 column + lam (out1 - ref)
  function penalty(net, X, n, ref, lam) {
    const record = forward(net, X, n);
    if (record === null) return null;
    const K = net.sizes[net.sizes.length - 1], out = record.a[record.a.length - 1];
    const Gt = rows(G_QUESTION, n);
    for (let i = 0; i < n; i++) Gt[i * K] += lam * (out[i * K] - ref[i]);    // G + lam (O_1 - ref)
    if (!allFinite([Gt])) return null;                  // distance_overflow, pull_overflow
    return backward(net, record, Gt, n);
  }

  // fixes.restore(net, X, ref), tol = 1e-12, max_iter = 20 (fixes.gauss_newton): theta <- theta -
  // J^T (J J^T)^+ (O_1 - ref) until max |O_1 - ref| <= tol, at most max_iter times. The tolerance is
  // max(tol, 16 eps max(1, max |ref|)) (fixes.restore_tolerance). Returns {net, converged} (the
  // RestoreReport's ``converged``), or null where the package raises (an overflow).
  const RESTORE = { tol: 1e-12, maxIter: 20, floorEps: 16 };
  function restore(net, X, n, ref) {
    const K = net.sizes[net.sizes.length - 1];
    const tol = Math.max(RESTORE.tol, RESTORE.floorEps * EPS * Math.max(1, ...Array.from(ref, Math.abs)));
    for (let it = 0; it <= RESTORE.maxIter; it++) {
      const record = forward(net, X, n);
      if (record === null) return null;                  // unreachable
      const out = record.a[record.a.length - 1], r = new Float64Array(n);
      let worst = 0;
      for (let i = 0; i < n; i++) { r[i] = out[i * K] - ref[i]; worst = Math.max(worst, Math.abs(r[i])); }
      if (!Number.isFinite(worst)) return null;          // distance_overflow
      if (worst <= tol || it === RESTORE.maxIter) return { net, converged: worst <= tol };
      const Jac = jacobian(net, record, n), G = gram(Jac);
      if (!allFinite([G])) return null;                  // gram_overflow
      const D = unflatten(net, rmatvec(Jac, gramSolver(G, n).solve(r)));
      net = step(net, D, 1.0);
      if (net === null) return null;                     // unreachable
    }
    return null;                                         // (the loop always returns above)
  }

  // measurements/explorer.py FIXES and rules.RULES: one step of each, from net, or null. A
  // network restored without converging is marked (``unrestored``): the page says so.
  const FIXES = ["naive", "masked", "freeze", "project", "project+restore", "penalty"];
  function takeStep(fix, net, X, n, lr, ref, lam) {
    if (fix === "project+restore") {                    // rules.WithRestore(project)
      const D = project(net, X, n);
      const moved = D === null ? null : step(net, D, lr);
      const restored = moved === null ? null : restore(moved, X, n, ref);
      if (restored !== null && !restored.converged) restored.net.unrestored = true;
      return restored === null ? null : restored.net;
    }
    const D = { naive, masked, freeze, project }[fix]?.(net, X, n) ??
              (fix === "penalty" ? penalty(net, X, n, ref, lam) : null);
    return D === null ? null : step(net, D, lr);
  }

  // fixes.penalty_limit: 2 / lambda_max(J J^T) of out1 on X, the largest stable lr * lam
  function penaltyLimit(net, X, n) {
    const record = forward(net, X, n);
    const { lam } = gramSolver(gram(jacobian(net, record, n)), n);
    return lam[n - 1] > 0 ? 2 / lam[n - 1] : Infinity;
  }

  // -- the measurement (mlp_ref/measurements/explorer.py state) ----------------------------------------
  // ``steps`` steps of ``fix`` at learning rate ``lr`` from the start of ``setup``; a step that
  // overflows, or leaves a parameter or an output not finite, is not taken, and the state is
  // diverged. Returns {gain, drift_batch, taken, diverged, delta (n x 2), weights, sizes}.
  function makeNet(setup) {
    return { sizes: setup.sizes, acts: setup.acts, W: setup.W.map((w) => Float64Array.from(w.flat())),
             b: setup.b.map((v) => Float64Array.from(v)) };
  }

  // The steps of ``fix`` from the start of ``setup``, taken one at a time (``advance``), every
  // network kept: ``at(steps)`` is then state(setup, fix, lr, steps, lam) for any steps up to those
  // taken, which the page uses to answer a change of steps at once and to spread a long run over
  // several slices of time.
  function trajectory(setup, fix, lr, lam) {
    if (!FIXES.includes(fix)) throw new Error(`fix: expected one of ${FIXES}, got ${fix}`);
    const n = setup.X.length, X = Float64Array.from(setup.X.flat()), K = setup.sizes[setup.sizes.length - 1];
    const net0 = makeNet(setup), L = setup.sizes.length - 1;
    const before = forward(net0, X, n).a[L];
    const ref = new Float64Array(n);
    for (let i = 0; i < n; i++) ref[i] = before[i * K];             // out1 at the start
    const nets = [net0];
    let stopped = false;                                             // a step overflowed
    return {
      get taken() { return nets.length - 1; },
      get stopped() { return stopped; },
      advance() {                                                    // one more step, if it can
        if (stopped) return false;
        const trial = takeStep(fix, nets[nets.length - 1], X, n, lr, ref, lam);
        if (trial === null || forward(trial, X, n) === null) { stopped = true; return false; }
        nets.push(trial);
        return true;
      },
      at(steps) {                                                    // the state after ``steps``
        const taken = Math.min(steps, nets.length - 1), net = nets[taken];
        const after = forward(net, X, n).a[L];
        const delta = after.map((v, c) => v - before[c]);
        let drift = 0, sum = 0;
        for (let i = 0; i < n; i++) {
          drift = Math.max(drift, Math.abs(delta[i * K]));          // max |delta out1|
          sum += delta[i * K + 1];                                   // for the mean delta out2
        }
        const weights = { W: net.W.map((w, l) => w.map((v, k) => Math.abs(v - net0.W[l][k]))),
                          b: net.b.map((v, l) => v.map((x, k) => Math.abs(x - net0.b[l][k]))) };
        const unrestored = nets.slice(1, taken + 1).findIndex((m) => m.unrestored) + 1;  // 0: none
        return { gain: sum / n, drift_batch: drift, taken, diverged: taken < steps, delta, weights,
                 sizes: setup.sizes, unrestored };
      },
    };
  }

  function state(setup, fix, lr, steps, lam) {
    const run = trajectory(setup, fix, lr, lam);
    while (run.taken < steps && run.advance());
    return run.at(steps);
  }

  // The page's window.mlpRef: state({setup, fix, lr, steps, lam}) with the setups' names, from the
  // data the page embeds (mlp_ref/classroom/explorable.py page_data), returning {gain, drift_batch,
  // taken, diverged} as measurements.explorer.state's; lam matters to the penalty only. The page
  // draws from trajectory(...).at(steps), which has the rest (delta, weights).
  function explorer(data) {
    return {
      data,
      state({ setup, fix, lr, steps, lam = data.penalty_lam }) {
        if (!(setup in data.setups)) throw new Error(`setup: expected one of ${Object.keys(data.setups)}, got ${setup}`);
        const s = state(data.setups[setup], fix, Number(lr), Math.trunc(Number(steps)), Number(lam));
        return { gain: s.gain, drift_batch: s.drift_batch, taken: s.taken, diverged: s.diverged };
      },
      trajectory({ setup, fix, lr, lam = data.penalty_lam }) {
        return trajectory(data.setups[setup], fix, Number(lr), Number(lam));
      },
      penaltyLimit(setup) {
        const s = data.setups[setup];
        return penaltyLimit(makeNet(s), Float64Array.from(s.X.flat()), s.X.length);
      },
    };
  }

  const api = { FIXES, explorer, state, trajectory, penaltyLimit, makeNet, forward, gradient, jacobian, gram, eigh,
                gramSolver, sigmoid };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.mlpMath = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
