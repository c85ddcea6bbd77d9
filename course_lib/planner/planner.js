/*
 * The course's training planner in JavaScript: the same model as course_lib/planner/
 * (inputs.py's checks, model.py's memory, cheapest change and step time,
 * compute_time.py's products, recomputation.py's checkpointing, and the pieces of
 * memory.py, cost_model.py, pipeline.py, context_parallel.py and roofline.py they use),
 * function for function, so that the planner answers in the page -- JupyterLab, Colab,
 * the static book -- with no kernel.
 *
 * It holds no number and no word of its own: every table (presets, GPUs, links,
 * precisions, optimizers, limits, constants) and every text (English and Dutch) comes
 * from Python, as course_lib.planner.widget.js_tables() writes them; the view's
 * configuration carries them. tests/test_planner.py runs this file under node on
 * hundreds of plans and requires the same numbers (relative 1e-12), the same verdicts
 * and the same error messages as Python.
 *
 * Usage: coursePlanner.plan(inputs, tables, language) returns the result as a plain
 * object (the shape of PlanResult.as_dict()) or throws an Error whose message is
 * Python's.
 */
(function (root) {
  "use strict";

  // ----------------------------------------------------------------------------------
  // Texts and numbers in messages (course_lib/numbers/i18n.py,
  // course_lib/planner/inputs.py)
  // -----------------------------------------------------------------------------------

  /** Fill a text's {name} placeholders from values, else from the table's entry. */
  function fill(template, values, table) {
    return String(template).split(/(\{\w+\})/).map(function (piece) {
      var match = /^\{(\w+)\}$/.exec(piece);
      if (!match) return piece;
      var name = match[1];
      if (values && values[name] !== undefined) return String(values[name]);
      if (table && table[name] !== undefined) return table[name];
      return piece;
    }).join("");
  }

  function text(T, language, key, values) {
    var table = T.texts[language];
    return fill(table[key], values, table);
  }

  /** A number written the English way, the language's way (i18n.localise_number). */
  function localise(formatted, T, language) {
    var table = T.texts[language];
    return String(formatted).split("").map(function (c) {
      if (c === ",") return table.thousands_separator;
      return c === "." ? table.decimal_point : c;
    }).join("");
  }

  /** Python's repr of a finite float that is not a whole number below 1e16. */
  function pyRepr(x) {
    var m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(x.toExponential());
    var sign = m[1], digits = m[2] + (m[3] || ""), exp = parseInt(m[4], 10);
    if (exp < -4 || exp >= 16) {
      var abs = Math.abs(exp);
      return sign + digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "") + "e" +
        (exp < 0 ? "-" : "+") + (abs < 10 ? "0" : "") + abs;
    }
    if (exp < 0) return sign + "0." + new Array(-exp).join("0") + digits;
    var whole = digits.slice(0, exp + 1), fraction = digits.slice(exp + 1);
    while (whole.length < exp + 1) whole += "0";
    return sign + whole + "." + (fraction || "0");
  }

  /** A value as a message shows it (inputs.shown). */
  function shown(value, T, language) {
    if (typeof value === "boolean") return value ? "true" : "false";
    if (typeof value === "string") return "'" + value + "'";
    if (typeof value !== "number") return "?";
    if (value !== value) return "nan";
    if (!isFinite(value)) return value > 0 ? "inf" : "-inf";
    var whole = Number.isInteger(value) && Math.abs(value) < 1e16;
    var t = whole ? String(value) : pyRepr(value);
    return localise(t, T, language);
  }

  /** A whole number with thousands separators (inputs._group). */
  function group(n, T, language) {
    var digits = String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return localise(digits, T, language);
  }

  function divisors(n) {
    var small = [], large = [];
    for (var d = 1; d * d <= n; d++) {
      if (n % d === 0) {
        small.push(d);
        if (d * d !== n) large.push(n / d);
      }
    }
    return small.concat(large.reverse());
  }

  // ----------------------------------------------------------------------------------
  // Reading and checking the inputs (inputs.py)
  // -----------------------------------------------------------------------------------
  var NUMBER = /^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?([kKmMbBgGtT]?)$/;
  var SCALE = { "": 1, k: 1e3, m: 1e6, b: 1e9, g: 1e9, t: 1e12 };

  function strip(s) { return s.replace(/^[ \t\n\r]+|[ \t\n\r]+$/g, ""); }

  /** The number a value stands for, or null (inputs.read_number). */
  function readNumber(value) {
    if (typeof value === "number") return value;
    if (typeof value !== "string") return null;
    var match = NUMBER.exec(strip(value));
    if (!match) return null;
    var number = match[0].slice(0, match[0].length - match[3].length);
    return Number(number) * SCALE[match[3].toLowerCase()];
  }

  function planError(message) {
    var err = new Error(message);
    err.planError = true;
    return err;
  }

  /** One input read and checked by its kind (inputs._read). */
  function readField(field, value, T, language) {
    function refuse(key, values) {
      var all = { what: text(T, language, "plan_what_" + field.name),
        value: shown(value, T, language) };
      for (var k in values) all[k] = values[k];
      return planError(text(T, language, key, all));
    }
    if (field.kind === "choice" || field.kind === "switch") {
      var options = T.choices[field.name];
      if (field.kind === "switch" && typeof value === "boolean") {
        return options[value ? 1 : 0];
      }
      var key = typeof value === "string" ? strip(value).toLowerCase() : null;
      if (options.indexOf(key) < 0) {
        throw refuse("plan_err_" + field.kind,
          { options: options.join(", "), off: options[0], on: options[1] });
      }
      return key;
    }
    if (field.kind === "bool") {
      if (typeof value !== "boolean") throw refuse("plan_err_bool");
      return value;
    }
    var x = readNumber(value);
    if (x === null) throw refuse("plan_err_number");
    var high = group(field.high, T, language);
    if (field.kind === "whole") {
      var near = isFinite(x) ? Math.floor(x + 0.5) : x;
      var whole = isFinite(x) && Math.abs(x - near) <= 1e-9 * Math.abs(x);
      if (!(whole && field.low <= near && near <= field.high)) {
        var low = group(field.low, T, language);
        throw refuse("plan_err_whole", { low: low, high: high });
      }
      return near;
    }
    if (field.kind === "nonneg") {
      if (!(0 <= x && x <= field.high)) throw refuse("plan_err_nonneg", { high: high });
      return x;
    }
    if (!(0 < x && x <= field.high)) throw refuse("plan_err_positive", { high: high });
    return x;
  }

  function makeLink(name, bandwidth, latency) {
    return { name: name, bandwidth: bandwidth, latency: latency };
  }

  /** A link by key, its latency (µs) and bandwidth (GB/s) overridden where given. */
  function chooseLink(key, alpha, beta, names, T, language) {
    if (key === "custom") {
      [alpha, beta].forEach(function (given, i) {
        if (given === null) {
          throw planError(text(T, language, "plan_err_missing_link",
            { what: text(T, language, "plan_what_" + names[i]) }));
        }
      });
      return makeLink("custom", beta * 1e9, alpha * 1e-6);
    }
    var base = T.links[key];
    if (alpha === null && beta === null) {
      return makeLink(base.name, base.bandwidth, base.latency);
    }
    return makeLink(base.name, beta === null ? base.bandwidth : beta * 1e9,
      alpha === null ? base.latency : alpha * 1e-6);
  }

  /** Read and check every input: the setup, or an Error in the language. */
  function check(input, T, language) {
    var v = {};
    T.fields.forEach(function (field) {
      var raw = input[field.name];
      if (raw === undefined || raw === null) raw = T.defaults[field.name];
      v[field.name] = raw === null ? null : readField(field, raw, T, language);
    });
    function missing(key, names) {
      names.forEach(function (name) {
        if (v[name] === null) {
          var what = text(T, language, "plan_what_" + name);
          throw planError(text(T, language, key, { what: what }));
        }
      });
    }
    function fail(key, values) {
      var out = {};
      for (var k in values) {
        var x = values[k];
        out[k] = typeof x === "number" ? group(x, T, language) : x;
      }
      return planError(text(T, language, key, out));
    }
    function options(list) {
      return list.map(function (d) { return group(d, T, language); }).join(", ");
    }
    var shapeNames = ["params", "layers", "hidden", "heads", "vocab", "seq_len"];
    var preset = null, name = "custom";
    if (v.model === "custom") {
      missing("plan_err_missing", shapeNames);
    } else {
      preset = T.presets[v.model];
      name = preset.name;
      shapeNames.forEach(function (key) { if (v[key] === null) v[key] = preset[key]; });
    }
    var block = preset ? [preset.kv_heads, preset.mlp, preset.experts, preset.top_k,
      preset.expert_params] : [null, 0, 1, 1, 0];
    ["kv_heads", "mlp", "experts", "top_k", "expert_params"].forEach(function (key, i) {
      if (v[key] === null) v[key] = block[i];
    });
    var gpuName, capacity, peak, hbm, ownLink, hostKey;
    if (v.gpu === "custom") {
      missing("plan_err_missing_gpu", ["gpu_memory_gb", "gpu_tflops", "gpu_hbm_tbs"]);
      gpuName = "custom GPU";
      capacity = v.gpu_memory_gb * 1e9;
      peak = v.gpu_tflops * 1e12;
      hbm = v.gpu_hbm_tbs * 1e12;
      ownLink = T.constants.custom_gpu_links[0];
      hostKey = T.constants.custom_gpu_links[1];
    } else {
      var gpu = T.gpus[v.gpu];
      gpuName = gpu.name;
      capacity = v.gpu_memory_gb === null ? gpu.memory : v.gpu_memory_gb * 1e9;
      peak = v.gpu_tflops === null ? gpu.peak[v.precision] : v.gpu_tflops * 1e12;
      hbm = v.gpu_hbm_tbs === null ? gpu.hbm : v.gpu_hbm_tbs * 1e12;
      ownLink = gpu.own_link;
      hostKey = gpu.host_link;
    }
    var margin = T.constants.margin, context = T.constants.cuda_context;
    if (capacity * (1 - margin) <= context) {
      throw fail("plan_err_gpu_memory", { least: Math.ceil(context / (1 - margin) / 1e6),
        margin: Math.round(100 * margin), context: Math.round(context / 1e6) });
    }
    var nodeLink = chooseLink(v.node_link || ownLink, v.node_alpha_us, v.node_beta_gbs,
      ["node_alpha_us", "node_beta_gbs"], T, language);
    var networkLink = chooseLink(v.network_link, v.net_alpha_us, v.net_beta_gbs,
      ["net_alpha_us", "net_beta_gbs"], T, language);

    var hidden = v.hidden, heads = v.heads, layers = v.layers;
    var perNode = v.gpus_per_node, tp = v.tp, pp = v.pp;
    var gpus = perNode * v.nodes;
    if (hidden % heads) throw fail("plan_err_heads", { hidden: hidden, heads: heads });
    var kvHeads = v.kv_heads === null ? heads : v.kv_heads;
    var experts = v.experts, topK = v.top_k, expertParams = v.expert_params;
    checkMixture(heads, kvHeads, experts, topK, expertParams, v.params, fail, options);
    var limit = T.constants.max_gpus;
    if (gpus > limit) throw fail("plan_err_gpus_max", { gpus: gpus, limit: limit });
    if (perNode % tp) {
      throw fail("plan_err_tp_node",
        { tp: tp, per_node: perNode, options: options(divisors(perNode)) });
    }
    if (hidden % tp || heads % tp) {
      var common = gcd(gcd(hidden, heads), perNode);
      throw fail("plan_err_tp_split",
        { tp: tp, hidden: hidden, heads: heads, options: options(divisors(common)) });
    }
    if (pp > layers) throw fail("plan_err_pp_layers", { pp: pp, layers: layers });
    var stages = checkStages(layers, pp, v.virtual_stages, v.edge_layers, fail);
    if (gpus % (tp * pp)) {
      throw fail("plan_err_mp_gpus", { tp: tp, pp: pp, mp: tp * pp, gpus: gpus });
    }
    var cp = v.cp, ep = v.ep;
    if (cp > 1 && v.seq_len % (2 * cp)) {
      var allowed = [1].concat(divisors(Math.floor(v.seq_len / 2)).filter(function (c) {
        return c > 1 && c <= 1024;
      }));
      throw fail("plan_err_cp_seq", { cp: cp, seq_len: v.seq_len, chunks: 2 * cp,
        options: options(allowed) });
    }
    if (gpus % (tp * cp * pp)) {
      throw fail("plan_err_cp_gpus",
        { tp: tp, cp: cp, pp: pp, mp: tp * cp * pp, gpus: gpus });
    }
    var dp = gpus / (tp * cp * pp);
    if (ep > 1 && experts === 1) throw fail("plan_err_ep_dense", { ep: ep });
    if (experts % ep || (dp * cp) % ep) {
      throw fail("plan_err_ep", { ep: ep, experts: experts, group: dp * cp,
        options: options(divisors(gcd(experts, dp * cp))) });
    }
    var shard = v.shard;
    if (shard !== null && v.zero === 0) throw fail("plan_err_shard_zero", {});
    if (shard !== null && (dp * cp) % shard) {
      throw fail("plan_err_shard",
        { shard: shard, dp: dp * cp, options: options(divisors(dp * cp)) });
    }
    if (v.global_batch === null) {
      v.global_batch = preset ? preset.global_batch : T.constants.custom_global_batch;
    }
    var batch = v.global_batch, micro = v.micro_batches;
    if (micro === null && batch % dp) {
      throw fail("plan_err_batch_dp", { batch: batch, dp: dp });
    }
    if (micro !== null && batch % (dp * micro)) {
      throw fail("plan_err_batch",
        { batch: batch, dp: dp, micro: micro, unit: dp * micro });
    }
    if (micro === null) micro = Math.floor(batch / dp);
    if (v.tokens === null) {
      v.tokens = preset ? preset.tokens : T.constants.tokens_per_param * v.params;
    }
    var host = T.links[hostKey];
    return {
      model: v.model, name: name, params: v.params, layers: layers, hidden: hidden,
      heads: heads, vocab: v.vocab, seq_len: v.seq_len, precision: v.precision,
      optimizer: v.optimizer, gpu: v.gpu, gpu_name: gpuName, capacity: capacity,
      peak: peak, gpus_per_node: perNode, nodes: v.nodes, gpus: gpus,
      node_link: nodeLink, network_link: networkLink,
      host_link: makeLink(host.name, host.bandwidth, host.latency), zero: v.zero,
      shard: shard === null ? dp * cp : shard, offload: v.offload, tp: tp, pp: pp,
      dp: dp,
      micro_batches: micro, micro_batch: Math.floor(batch / (dp * micro)),
      checkpointing: v.checkpointing, flash_attention: v.flash_attention,
      dropout: v.dropout, global_batch: batch, tokens: v.tokens, mfu: v.mfu,
      hbm: hbm, tp_overlap: v.tp_overlap, virtual_stages: stages[2],
      edge_layers: stages[0], middle_layers: stages[1], kv_heads: kvHeads,
      experts: experts, top_k: topK, expert_params: expertParams, cp: cp, ep: ep,
      sequence_parallel: v.sequence_parallel, mlp: v.mlp, ep_overlap: v.ep_overlap,
      zero3_live: v.zero3_live
    };
  }

  /** inputs._check_mixture: key-value heads, top-k and expert parameters, checked. */
  function checkMixture(heads, kvHeads, experts, topK, expertParams, params, fail,
    options) {
    if (heads % kvHeads) {
      throw fail("plan_err_kv_heads", { kv_heads: kvHeads, heads: heads,
        options: options(divisors(heads)) });
    }
    if (topK > experts) {
      throw fail("plan_err_top_k", { top_k: topK, experts: experts });
    }
    if (experts === 1 && expertParams > 0) {
      throw fail("plan_err_expert_params_dense", {});
    }
    if (experts > 1 && !(0 < expertParams && expertParams < params)) {
      throw fail("plan_err_expert_params", { experts: experts, params: params });
    }
  }

  /** inputs._stages: the first (and last) stage's layers, the busiest middle stage's,
   * the virtual stages, checked. */
  function checkStages(layers, pp, virtual, edge, fail) {
    if (virtual > 1 && pp === 1) throw fail("plan_err_virtual_pp", { virtual: virtual });
    var even = Math.ceil(layers / pp);
    if (edge === null) {
      if (pp * virtual > layers) {
        throw fail("plan_err_virtual_layers", { virtual: virtual, pp: pp,
          layers: layers, most: Math.floor(layers / pp) });
      }
      return [even, even, virtual];
    }
    if (pp < 3) throw fail("plan_err_edge_pp", { pp: pp });
    if (edge < virtual - 1) {
      throw fail("plan_err_edge_virtual", { edge: edge, virtual: virtual,
        least: virtual - 1 });
    }
    if (2 * edge + (pp - 2) * virtual > layers) {
      throw fail("plan_err_edge_layers", { edge: edge, layers: layers, pp: pp,
        most: Math.floor((layers - (pp - 2) * virtual) / 2) });
    }
    return [edge, Math.ceil((layers - 2 * edge) / (pp - 2)), virtual];
  }

  function gcd(a, b) {
    while (b) { var r = a % b; a = b; b = r; }
    return a;
  }

  // ----------------------------------------------------------------------------------
  // The alpha-beta model (course_lib/parallel/cost_model.py)
  // -----------------------------------------------------------------------------------

  function ringAllreduceTime(nBytes, n, link) {
    return 2 * (n - 1) * link.latency + 2 * (n - 1) / n * nBytes / link.bandwidth;
  }

  function ringTime(kind, nBytes, n, link) {
    if (n === 1) return 0;
    if (kind === "all-reduce") return ringAllreduceTime(nBytes, n, link);
    if (kind === "all-gather" || kind === "reduce-scatter") {
      return (n - 1) * link.latency + (n - 1) / n * nBytes / link.bandwidth;
    }
    return (n - 1) * link.latency + nBytes / link.bandwidth; // broadcast
  }

  function makeCluster(node, network, gpusPerNode) {
    return { node: node, network: network, gpusPerNode: gpusPerNode };
  }

  function clusterNodes(c, world) {
    return Math.max(1, Math.ceil(world / c.gpusPerNode));
  }

  function busBandwidth(c, world) {
    if (clusterNodes(c, world) === 1) return c.node.bandwidth;
    return Math.min(c.node.bandwidth, c.gpusPerNode * c.network.bandwidth);
  }

  function allreduceTime(size, bigN, c, algorithm) {
    if (algorithm === undefined) {
      return Math.min(allreduceTime(size, bigN, c, "ring"),
        allreduceTime(size, bigN, c, "tree"),
        allreduceTime(size, bigN, c, "hierarchical"));
    }
    var n = clusterNodes(c, bigN), g = Math.min(c.gpusPerNode, bigN);
    if (n === 1) return ringAllreduceTime(size, bigN, c.node);
    var aNode = c.node.latency, aNet = c.network.latency;
    var bus = busBandwidth(c, bigN);
    if (algorithm === "ring") {
      return (2 * (bigN - n) * aNode + 2 * (n - 1) * aNet
        + 2 * (bigN - 1) / bigN * size / bus);
    }
    if (algorithm === "tree") {
      return 2 * ((g - 1) * aNode + Math.log2(n) * aNet) + 2 * size / bus;
    }
    return ringAllreduceTime(size, g, c.node) +
      ringAllreduceTime(size / g, n, c.network);
  }

  function allgatherTime(size, world, c) {
    return allreduceTime(size, world, c, "ring") / 2;
  }

  function offloadTransferTime(nParams, world, link, bytesPerParam) {
    var perRank = nParams / world * bytesPerParam;
    return perRank / link.bandwidth;
  }

  // ----------------------------------------------------------------------------------
  // Memory (course_lib/numbers/memory.py), the bubble (pipeline.py), C = 6ND
  // (roofline.py)
  // -----------------------------------------------------------------------------------

  /** training_memory's model states and buffers, the whole model over `gpus` GPUs. */
  function trainingMemory(n, precisionName, optimizerName, gpus, zero, hidden, T) {
    var prec = T.precisions[precisionName], opt = T.optimizers[optimizerName];
    var stateBytes = opt.bytes_per_state !== null ? opt.bytes_per_state
      : prec.state_bytes;
    var weights = n * prec.weight_bytes;
    var grads = n * prec.grad_bytes;
    var master = n * prec.master_bytes;
    var states = n * opt.n_states * stateBytes;
    if (zero >= 1) { master /= gpus; states /= gpus; }
    if (zero >= 2) grads /= gpus;
    if (zero >= 3) weights /= gpus;
    var gathered = 0, temporaries = 0;
    if (zero === 3 && gpus > 1) {
      var largestLayer = (12 * hidden * hidden + 13 * hidden) * prec.weight_bytes;
      gathered = 2 * largestLayer;
    }
    if (gpus > 1) temporaries += T.constants.bucket_temporaries;
    return { weights: weights, gradients: grads, master_weights: master,
      optimizer_states: states, temporaries: temporaries + gathered, gathered: gathered };
  }

  /** memory.activation_bytes_per_layer: kvHeads null for one per head, mlp 0 for GELU's
   * 4h-wide MLP, else a gated MLP's width. */
  function activationBytesPerLayer(s, b, h, a, e, maskBytes, dropout, attentionScores,
    kvHeads, mlp) {
    var d = dropout ? maskBytes : 0;
    var r = kvHeads === null ? 1 : kvHeads / a;
    var width = 6 + 2 * r + (mlp ? 4 * mlp / h : 8);
    return s * b * h * (width * e + 2 * d) +
      (attentionScores ? a * s * s * b * (e + (dropout ? 1 : 0) * (e + d)) : 0);
  }

  /** memory.activation_bytes_per_tp_rank: the norms' and projections' inputs and the
   * masks whole without SP. */
  function activationBytesPerTpRank(s, b, h, a, t, sp, e, maskBytes, dropout, scores,
    kvHeads, mlp) {
    var total = activationBytesPerLayer(s, b, h, a, e, maskBytes, dropout, scores,
      kvHeads, mlp);
    if (sp || t === 1) return total / t;
    var whole = s * b * h * (4 * e + (dropout ? 2 * maskBytes : 0));
    return whole + (total - whole) / t;
  }

  function theoreticalBubble(stages, microBatches, virtual) {
    return (stages - 1) / (virtual * microBatches + stages - 1);
  }

  function trainingFlops(nParams, tokens) { return 6 * nParams * tokens; }

  // ----------------------------------------------------------------------------------
  // The model (model.py)
  // -----------------------------------------------------------------------------------

  function stageShare(s) {
    if (s.pp === 1) return 1;
    var embedding = s.vocab * s.hidden;
    var perLayer = Math.max(0, s.params - embedding) / s.layers;
    return Math.min(1, (s.edge_layers * perLayer + embedding) / s.params);
  }

  /** model.active_params: the dense parameters and top_k / experts of the experts'. */
  function activeParams(s) {
    return s.params - s.expert_params + s.expert_params * s.top_k / s.experts;
  }

  function heldParams(s) { return s.params - s.expert_params * (1 - 1 / s.ep); }

  /** model._stage_shares: the first stage's share of the dense and the expert
   * parameters. */
  function stageShares(s) {
    if (s.pp === 1) return [1, 1];
    var experts = Math.min(1, s.edge_layers / s.layers);
    if (s.expert_params === 0) return [stageShare(s), experts];
    var dense = s.params - s.expert_params;
    return [(stageShare(s) * s.params - experts * s.expert_params) / dense, experts];
  }

  // ----------------------------------------------------------------------------------
  // Activation checkpointing: none, full, torchtitan's selective policy, or attention's
  // scores recomputed (recomputation.py)
  // -----------------------------------------------------------------------------------

  /** recomputation.collective_passes: a group's collectives per layer and micro-batch. */
  function collectivePasses(s, T, group) {
    return T.constants.collective_passes[group][s.checkpointing];
  }

  /** recomputation.saved_per_layer: what a layer saves without checkpointing; scores
   * false leaves attention's core out (undefined: unless attention is fused). */
  function savedPerLayer(s, T, scores) {
    var e = T.precisions[s.precision].activation_bytes;
    if (scores === undefined) scores = !s.flash_attention;
    return activationBytesPerTpRank(s.seq_len, s.micro_batch, s.hidden, s.heads, s.tp,
      s.sequence_parallel, e, 1, s.dropout, scores, s.kv_heads, s.mlp) / s.cp;
  }

  /** recomputation.selective_widths: [kept that a layer saves anyway, kept beyond], per
   * token in elements. */
  function selectiveWidths(s) {
    var h = s.hidden, t = s.tp;
    var r = s.kv_heads / s.heads;
    var products, beyond;
    if (s.mlp) {
      products = h + h * r + s.mlp;
      beyond = h;
    } else {
      products = h * (1 + 2 * r) + 4 * h;
      beyond = 0;
    }
    var attention = s.flash_attention ? h : 0;
    if (s.sequence_parallel && t > 1) beyond += 2 * h / t;
    var split = s.sequence_parallel ? t : 1;
    return [h / split + (products + attention) / t, beyond];
  }

  /** recomputation._bytes: bytes of width elements per token of a micro-batch. */
  function widthBytes(s, T, width) {
    var e = T.precisions[s.precision].activation_bytes;
    return s.seq_len * s.micro_batch * width * e / s.cp;
  }

  /** recomputation.kept_per_layer: all (none), all but attention's core (attention),
   * the input (full), or what the policy keeps (selective). */
  function keptPerLayer(s, T) {
    if (s.checkpointing === "none" || s.checkpointing === "attention") {
      return savedPerLayer(s, T, s.checkpointing === "none" && !s.flash_attention);
    }
    if (s.checkpointing === "full") {
      return widthBytes(s, T, s.hidden / (s.sequence_parallel ? s.tp : 1));
    }
    var widths = selectiveWidths(s);
    return widthBytes(s, T, widths[0] + widths[1]);
  }

  /** recomputation.recomputed_writes: bytes a recomputed forward writes once more. */
  function recomputedWrites(s, T) {
    if (s.checkpointing === "none" || s.checkpointing === "attention") {
      return savedPerLayer(s, T) - keptPerLayer(s, T);
    }
    if (s.checkpointing === "full") return savedPerLayer(s, T);
    return savedPerLayer(s, T) - widthBytes(s, T, selectiveWidths(s)[0]);
  }

  /** recomputation.recomputed_share: the share of the products run again. */
  function recomputedShare(s) {
    if (s.checkpointing !== "selective") return s.checkpointing === "full" ? 1 : 0;
    var r = s.kv_heads / s.heads;
    if (s.mlp) {
      var m = s.mlp / s.hidden;
      return (r + 1 + m) / (2 + 2 * r + 3 * m);
    }
    return 5 / (10 + 2 * r);
  }

  /** recomputation.recomputes_attention. */
  function recomputesAttention(s) {
    return s.checkpointing === "full" || ((s.checkpointing === "attention" ||
      s.checkpointing === "selective") && !s.flash_attention);
  }

  /** model.held_layers: the first stage's layer activations held at once. */
  function heldLayers(s) {
    var p = s.pp, v = s.virtual_stages, m = s.micro_batches;
    if (v === 1) return Math.min(p, m) * s.edge_layers;
    var chunk = Math.ceil(s.middle_layers / v);
    var first = Math.max(0, s.edge_layers - (v - 1) * chunk);
    var perRound = Math.floor(m / Math.max(1, Math.floor(m / p)));
    var forwards = Math.min((v - 1) * perRound + 2 * (p - 1) + 1, v * m);
    var rounds = Math.floor(forwards / perRound), rest = forwards % perRound;
    var held = 0;
    for (var j = 0; j < rounds; j++) held += perRound * (j % v === 0 ? first : chunk);
    return held + rest * (rounds % v === 0 ? first : chunk);
  }

  /** model.fsdp_buffers: the root unit gathered, one layer's gradients reduced in FP32;
   * with zero3_live (DeepSpeed), that many parameters gathered and gradients reduced. */
  function fsdpBuffers(s, T) {
    if (s.zero < 3 || s.shard === 1) return 0;
    var precision = T.precisions[s.precision];
    if (s.zero3_live) {
      return s.zero3_live * (precision.weight_bytes + precision.grad_bytes);
    }
    var weight = precision.weight_bytes;
    var embedding = s.vocab * s.hidden;
    var perLayer = Math.max(0, heldParams(s) - 2 * embedding) / s.layers;
    var root = (s.pp === 1 ? 2 : 1) * embedding * weight;
    return (root + perLayer * T.constants.reduce_bytes) / s.tp;
  }

  function memoryPerGpu(s, T) {
    var states = trainingMemory(s.params - s.expert_params, s.precision, s.optimizer,
      s.shard, s.zero, s.hidden, T);
    var shares = stageShares(s);
    var here = shares[0] / s.tp;
    var parameters = states.weights * here;
    var gradients = states.gradients * here;
    var optimizer = (states.master_weights + states.optimizer_states) * here;
    if (s.expert_params) {
      var routed = trainingMemory(s.expert_params, s.precision, s.optimizer,
        Math.max(1, Math.floor(s.shard / s.ep)), s.zero, s.hidden, T);
      var mine = shares[1] / (s.ep * s.tp);
      parameters += routed.weights * mine;
      gradients += routed.gradients * mine;
      optimizer += (routed.master_weights + routed.optimizer_states) * mine;
    }
    var host = 0;
    if (s.offload) { host = optimizer; optimizer = 0; }
    var perLayer = savedPerLayer(s, T);
    var kept = keptPerLayer(s, T);
    // and the layer being recomputed: all it saves, or attention's core alone
    var again = s.checkpointing === "full" || s.checkpointing === "selective" ?
      perLayer : perLayer - kept;
    var activations = heldLayers(s) * kept + again;
    if (s.pp === 1) {
      activations += s.micro_batch * s.seq_len * s.vocab * 4 / s.tp / s.cp;
    }
    // The gathered layers are split by tensor parallelism, as their shards are
    // (with zero3_live, fsdpBuffers stands for them).
    var kept = s.zero3_live ? 0 : states.gathered / s.tp;
    var buffers = states.temporaries - states.gathered + kept + fsdpBuffers(s, T);
    var total = parameters + gradients + optimizer + activations + buffers;
    var usable = s.capacity * (1 - T.constants.margin) - T.constants.cuda_context;
    return { parameters: parameters, gradients: gradients, optimizer: optimizer,
      activations: activations, buffers: buffers,
      cuda_context: T.constants.cuda_context, host: host, total: total, usable: usable,
      capacity: s.capacity, fits: total <= usable };
  }

  function cheapestChange(input, s, T, language) {
    var candidates = [];
    for (var z = s.zero + 1; z < 4; z++) {
      candidates.push(["zero", s.zero, z, { zero: z }]);
    }
    if (s.checkpointing === "none" || s.checkpointing === "attention") {
      candidates.push(["selective", 0, 1, { checkpointing: "selective" }]);
    }
    if (s.checkpointing !== "full") {
      candidates.push([s.checkpointing === "none" ? "checkpointing" : "full", 0, 1,
        { checkpointing: true }]);
    }
    for (var t = s.tp * 2; t <= s.gpus_per_node; t *= 2) {
      candidates.push(["tp", s.tp, t, { tp: t }]);
    }
    for (var p = s.pp * 2; p <= s.layers; p *= 2) {
      candidates.push(["pp", s.pp, p, { pp: p }]);
    }
    for (var n = s.nodes * 2; n * s.gpus_per_node <= T.constants.max_gpus; n *= 2) {
      candidates.push(["nodes", s.nodes, n, { nodes: n }]);
    }
    for (var i = 0; i < candidates.length; i++) {
      var c = candidates[i], changedInput = {};
      for (var k in input) changedInput[k] = input[k];
      for (var key in c[3]) changedInput[key] = c[3][key];
      var changed;
      try {
        changed = check(changedInput, T, language);
      } catch (err) {
        if (err && err.planError) continue;
        throw err;
      }
      if (memoryPerGpu(changed, T).fits) {
        return { kind: c[0], start: c[1], end: c[2], gpus: changed.gpus };
      }
    }
    return null;
  }

  function collective(kind, nBytes, n, c, T) {
    if (n === 1 || nBytes === 0) return 0;
    var piece = T.constants.bucket;
    var full = Math.floor(nBytes / piece);
    var rest = nBytes - full * piece;
    function one(size) {
      if (kind === "all-reduce") return allreduceTime(size, n, c);
      return allgatherTime(size, n, c);
    }
    return (full ? full * one(piece) : 0) + (rest > 0 ? one(rest) : 0);
  }

  function groupCluster(s, spacing) {
    return makeCluster(s.node_link, s.network_link,
      Math.max(1, Math.floor(s.gpus_per_node / spacing)));
  }

  function perUnit(nBytes, units, n, c) {
    if (n === 1 || nBytes === 0) return 0;
    return units * allgatherTime(nBytes / units, n, c);
  }

  /** data_parallel_time.exposed_gathers: a forward pass's gathers its compute does not
   * hide, the first unit's and what each later one overruns its predecessor's compute. */
  function exposedGathers(gather, units, compute) {
    return gather / units + (units - 1) / units * Math.max(0, gather - compute);
  }

  /** data_parallel_time.data_parallel_time: [all of its seconds, the exposed part]. */
  function dataParallel(s, compute, T) {
    var precision = T.precisions[s.precision];
    var local = heldParams(s) * stageShare(s) / s.tp;
    var weights = local * precision.weight_bytes, grads = local * precision.grad_bytes;
    var g = groupCluster(s, s.tp * s.pp);
    var perMicro = compute / s.micro_batches;
    var lastBackward = T.constants.backward_share * perMicro;
    if (s.zero === 0) {
      var all = collective("all-reduce", grads, s.dp * s.cp, g, T);
      return [all, Math.max(0, all - lastBackward)];
    }
    var units = s.edge_layers;
    var gather = perUnit(weights, units, s.shard, g);
    var scatter = perUnit(grads, units, s.shard, g);
    var replicas = collective("all-reduce", grads / s.shard, s.dp * s.cp / s.shard,
      groupCluster(s, s.tp * s.pp * s.shard), T);
    var forward = perMicro * 2 / (6 + 2 * recomputedShare(s));
    if (s.zero < 3) {
      return [scatter + replicas + gather,
        Math.max(0, scatter + replicas - lastBackward) +
        exposedGathers(gather, units, forward)];
    }
    var backward = perMicro - forward;
    var perStep = exposedGathers(gather, units, forward) +
      Math.max(0, gather + scatter - backward);
    return [s.micro_batches * (2 * gather + scatter) + replicas,
      s.micro_batches * perStep + Math.max(0, replicas - lastBackward)];
  }

  /** model.attention_flops: Q K^T and A V in one step, 4 l h_a s per token a pass
   * (forward, backward twice, recomputed forward), half of it causal and fused. */
  function attentionFlops(s) {
    var headWidth = s.heads * Math.floor(s.hidden / s.heads);
    var passes = recomputesAttention(s) ? 4 : 3;
    var perToken = passes * 4 * s.layers * headWidth * s.seq_len;
    if (s.flash_attention) perToken /= 2;
    return perToken * s.global_batch * s.seq_len;
  }

  /** roofline.matmul_operation: batch products of (m x k) by (k x n), e bytes each. */
  function matmul(m, k, n, e, batch) {
    return { flops: 2 * batch * m * k * n, bytes: batch * (m * k + k * n + m * n) * e };
  }

  /** compute_time.dense_products: 6 N's products on one GPU, one micro-batch. */
  function denseProducts(s, e) {
    var h = s.hidden, t = s.tp, m = s.micro_batch * Math.floor(s.seq_len / s.cp);
    var dHead = Math.floor(h / s.heads);
    var heads = Math.floor(s.heads / t), kv = Math.ceil(s.kv_heads / t);
    var layers = s.layers;
    var out = [matmul(m, h, (heads + 2 * kv) * dHead, e, layers),
      matmul(m, heads * dHead, h, e, layers)];
    var attention = h * (s.heads + 2 * s.kv_heads) * dHead + s.heads * dHead * h;
    var dense = (s.params - s.expert_params - s.vocab * h) / layers - attention;
    var width = Math.floor(dense / (2 * h) / t);
    if (width >= 1) {
      out.push(matmul(m, h, width, e, layers), matmul(m, width, h, e, layers));
    }
    if (s.expert_params > 0) {
      width = Math.max(1,
        Math.floor(s.expert_params / (layers * s.experts * 2 * h) / t));
      var tokens = Math.max(1, Math.floor(m * s.ep * s.top_k / s.experts));
      var here = layers * Math.floor(s.experts / s.ep);
      out.push(matmul(tokens, h, width, e, here), matmul(tokens, width, h, e, here));
    }
    out.push(matmul(m, h, Math.ceil(s.vocab / t), e, 1));
    return out;
  }

  /** compute_time.attention_products: unfused Q K^T and A V, or one fused kernel. */
  function attentionProducts(s, e) {
    var dHead = Math.floor(s.hidden / s.heads);
    var heads = Math.floor(s.heads / s.tp), kv = Math.ceil(s.kv_heads / s.tp);
    var queries = Math.floor(s.seq_len / s.cp), keys = s.seq_len;
    if (!s.flash_attention) {
      var many = s.micro_batch * heads;
      return [matmul(queries, dHead, keys, e, many),
        matmul(queries, keys, dHead, e, many)];
    }
    return [{ flops: 2 * 2 * s.micro_batch * heads * queries * keys * dHead / 2,
      bytes: e * s.micro_batch * dHead * (2 * heads * queries + 2 * kv * keys) }];
  }

  /** compute_time._hbm_share: HBM seconds per second of arithmetic. */
  function hbmShare(ops, peak, hbm) {
    var flops = 0, bytes = 0;
    ops.forEach(function (op) { flops += op.flops; bytes += op.bytes; });
    return bytes / hbm / (flops / peak);
  }

  /** model._compute: [the busiest GPU's computing seconds, the memory-bound part]. */
  function computeTime(s, T) {
    var tokens = s.global_batch * s.seq_len;
    var active = activeParams(s);
    var work = trainingFlops(active, tokens) + 2 * active * tokens * recomputedShare(s);
    var attention = attentionFlops(s);
    var busiest = Math.max(s.edge_layers, s.middle_layers);
    var scale = busiest * s.pp / s.layers / (s.gpus * s.peak * s.mfu);
    var e = T.precisions[s.precision].activation_bytes, peak = s.peak * s.mfu;
    var denseBytes = hbmShare(denseProducts(s, e), peak, s.hbm);
    var attentionBytes = hbmShare(attentionProducts(s, e), peak, s.hbm);
    var arithmetic = (work + attention) * scale;
    var traffic = (work * denseBytes + attention * attentionBytes) * scale;
    var saved = savedPerLayer(s, T) * busiest;
    if (s.pp === 1) saved += s.micro_batch * s.seq_len * s.vocab * 4 / s.tp / s.cp;
    var again = recomputedWrites(s, T) * busiest;
    var bound = s.micro_batches * (T.constants.hbm_passes * saved + again) / s.hbm +
      traffic;
    return [arithmetic + bound, bound];
  }

  /** model.context_parallel_bytes: (c - 1) 2 (s / c) b n_kv d_head e, per GPU. */
  function contextParallelBytes(s, T) {
    var e = T.precisions[s.precision].activation_bytes;
    var kvHere = Math.ceil(s.kv_heads / s.tp);
    return (s.cp - 1) * 2 * Math.floor(s.seq_len / s.cp) * kvHere *
      Math.floor(s.hidden / s.heads) * e * s.micro_batch;
  }

  /** model.expert_parallel_bytes: (ep - 1) / ep of k h e per token a GPU holds. */
  function expertParallelBytes(s, T) {
    var e = T.precisions[s.precision].activation_bytes;
    var tokens = Math.floor(s.seq_len / s.cp) * s.micro_batch / s.tp;
    return (s.ep - 1) / s.ep * s.top_k * tokens * s.hidden * e;
  }

  /** model._context_and_experts: [CP's K/V collectives, EP's all-to-alls], seconds. */
  function contextAndExperts(s, T) {
    var layers = Math.max(s.edge_layers, s.middle_layers) * s.micro_batches;
    var cp = 0, ep = 0, link;
    if (s.cp > 1) {
      link = s.tp * s.cp <= s.gpus_per_node ? s.node_link : s.network_link;
      var gathered = contextParallelBytes(s, T) / (s.cp - 1) * s.cp;
      cp = layers * collectivePasses(s, T, "cp") *
        ringTime("all-gather", gathered, s.cp, link);
    }
    if (s.ep > 1) {
      link = s.tp * s.ep <= s.gpus_per_node ? s.node_link : s.network_link;
      var sent = expertParallelBytes(s, T) * s.ep / (s.ep - 1);
      ep = layers * collectivePasses(s, T, "ep") *
        ringTime("all-gather", sent, s.ep, link);
    }
    return [cp, ep];
  }

  /** model.not_hidden: communication left once its share overlap hides behind compute. */
  function notHidden(seconds, overlap, compute) {
    return seconds - Math.min(overlap * seconds, compute);
  }

  function stepTime(s, T) {
    var precision = T.precisions[s.precision];
    var computed = computeTime(s, T), compute = computed[0];
    var message = Math.floor(s.seq_len / s.cp) * s.micro_batch * s.hidden *
      precision.activation_bytes;
    var allReduce = ringTime("all-reduce", message, s.tp, s.node_link);
    var layersHere = Math.max(s.edge_layers, s.middle_layers);
    var tp = notHidden(layersHere * s.micro_batches * collectivePasses(s, T, "tp") *
      allReduce, s.tp_overlap, compute);
    var pp = 0;
    if (s.pp > 1) {
      var link = s.tp * s.pp <= s.gpus_per_node ? s.node_link : s.network_link;
      pp = 2 * s.micro_batches * s.virtual_stages *
        ringTime("broadcast", message / s.tp, 2, link);
    }
    var spread = contextAndExperts(s, T);
    spread[1] = notHidden(spread[1], s.ep_overlap, compute);
    var busy = compute + tp + pp + spread[0] + spread[1];
    var share = theoreticalBubble(s.pp, s.micro_batches, s.virtual_stages);
    var bubble = busy * share / (1 - share);
    var dp = dataParallel(s, compute, T);
    var offload = 0;
    if (s.offload) {
      offload = offloadTransferTime(heldParams(s) / (s.tp * s.pp), s.shard, s.host_link,
        precision.grad_bytes + precision.weight_bytes);
    }
    var step = busy + bubble + dp[1] + offload;
    return { compute: compute, memory_bound: computed[1], tp: tp, pp: pp,
      cp: spread[0], ep: spread[1], bubble: bubble, dp: dp[0], dp_exposed: dp[1],
      offload: offload, step: step, bubble_share: share,
      cp_bytes: contextParallelBytes(s, T), ep_bytes: expertParallelBytes(s, T) };
  }

  /** Check a plan and say what it needs and takes (model.plan); throws on bad input. */
  function plan(input, T, language) {
    language = language || "en";
    var s = check(input || {}, T, language);
    var held = memoryPerGpu(s, T);
    var change = held.fits ? null : cheapestChange(input || {}, s, T, language);
    var time = stepTime(s, T);
    var tokensPerStep = s.global_batch * s.seq_len;
    var steps = s.tokens / tokensPerStep;
    var seconds = steps * time.step;
    var active = activeParams(s);
    var flops = trainingFlops(active, tokensPerStep);
    return {
      setup: s, memory: held, change: change, time: time,
      tokens_per_step: tokensPerStep, steps: steps, seconds: seconds,
      days: seconds / T.constants.seconds_per_day,
      gpu_hours: seconds * s.gpus / 3600, flops: trainingFlops(active, s.tokens),
      achieved_mfu: flops / (time.step * s.gpus * s.peak)
    };
  }

  // ----------------------------------------------------------------------------------
  // The view: inputs, a stacked bar of memory against capacity, the verdict, the step,
  // the run
  // -----------------------------------------------------------------------------------
  var COMPONENTS = ["cuda_context", "parameters", "gradients", "optimizer",
    "activations", "buffers"];
  var TIMES = [["compute", "plan_time_compute"], ["tp", "plan_time_tp"],
    ["pp", "plan_time_pp"], ["cp", "plan_time_cp"], ["ep", "plan_time_ep"],
    ["bubble", "plan_time_bubble"],
    ["dp_exposed", "plan_time_dp"], ["offload", "plan_time_offload"]];
  var GROUPS = [
    ["plan_heading_model", ["model", "params", "layers", "hidden", "heads", "kv_heads",
      "mlp", "vocab", "experts", "top_k", "expert_params", "seq_len", "global_batch",
      "tokens"]],
    ["plan_heading_hardware", ["gpu", "gpu_memory_gb", "gpu_tflops", "gpu_hbm_tbs",
      "gpus_per_node",
      "nodes", "node_link", "node_alpha_us", "node_beta_gbs", "network_link",
      "net_alpha_us", "net_beta_gbs"]],
    ["plan_heading_strategy", ["precision", "optimizer", "zero", "shard", "zero3_live",
      "offload",
      "tp", "tp_overlap", "sequence_parallel", "cp", "pp", "virtual_stages",
      "edge_layers", "ep", "ep_overlap", "micro_batches", "checkpointing",
      "flash_attention", "dropout",
      "mfu"]]
  ];
  // Inputs a new model or GPU choice resets to the preset's or datasheet's values.
  var FROM_MODEL = ["params", "layers", "hidden", "heads", "kv_heads", "mlp", "vocab",
    "experts", "top_k", "expert_params", "seq_len", "global_batch", "tokens"];
  var FROM_GPU = ["gpu_memory_gb", "gpu_tflops", "gpu_hbm_tbs"];

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/'/g, "&#39;").replace(/"/g, "&quot;");
  }

  /** A tag with attributes (values escaped) around inner HTML. */
  function tag(name, attributes, inner) {
    var out = "<" + name;
    for (var key in attributes) {
      if (attributes[key] === true) out += " " + key;
      else if (attributes[key] !== false) {
        out += " " + key + "='" + esc(attributes[key]) + "'";
      }
    }
    return out + ">" + (inner === undefined ? "" : inner + "</" + name + ">");
  }

  function View(root, cfg) {
    this.root = root;
    this.T = cfg.tables;
    this.language = cfg.language || "en";
    this.focus = cfg.focus || "all";
    this.fields = {};
    var self = this;
    this.T.fields.forEach(function (f) { self.fields[f.name] = f; });
    this.build(cfg.inputs || {});
    this.update();
  }

  View.prototype.t = function (key, values) {
    return text(this.T, this.language, key, values);
  };
  View.prototype.q = function (role) {
    return this.root.querySelector("[data-role='" + role + "']");
  };
  View.prototype.input = function (name) {
    return this.root.querySelector("[data-field='" + name + "']");
  };
  View.prototype.local = function (t) { return localise(t, this.T, this.language); };

  /** x with `digits` decimals and thousands separators, the language's way. */
  View.prototype.dec = function (x, digits) {
    var parts = x.toFixed(digits).split(".");
    var whole = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return this.local(whole + (parts.length > 1 ? "." + parts[1] : ""));
  };
  View.prototype.pct = function (x, digits) {
    return this.local((100 * x).toFixed(digits) + "%");
  };
  /** A large count in thousands, millions, billions, trillions: 2T, 6.74B. */
  View.prototype.short = function (x) {
    var scales = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < scales.length; i++) {
      if (Math.abs(x) >= scales[i][0]) {
        var digits = String(Number((x / scales[i][0]).toPrecision(3)));
        return this.local(digits) + scales[i][1];
      }
    }
    return this.local(String(Number(x.toPrecision(3))));
  };

  /** The words an option shows: a preset's, GPU's or link's name, else its value. */
  View.prototype.optionText = function (name, option) {
    if (option === "custom") return this.t("plan_custom");
    var own = "plan_option_" + name + "_" + option;
    if (this.T.texts.en[own] !== undefined) return this.t(own);
    if (name === "model") return this.T.presets[option].name;
    if (name === "gpu") return this.T.gpus[option].name;
    var link = name === "node_link" || name === "network_link";
    if (link) return this.T.links[option].name;
    return option;
  };

  View.prototype.control = function (name, given) {
    var field = this.fields[name], self = this;
    var id = "course-plan-" + name + "-" + Math.random().toString(36).slice(2, 8);
    var key = this.T.texts.en["plan_label_" + name] !== undefined ? "plan_label_" + name
      : "plan_what_" + name;
    var label = tag("label", { "for": id }, esc(this.t(key)));
    var value = given === undefined || given === null ? this.T.defaults[name] : given;
    var html;
    if (field.kind === "bool") {
      html = tag("input",
        { id: id, type: "checkbox", "data-field": name, checked: !!value });
    } else if (field.kind === "choice" || field.kind === "switch" || name === "zero") {
      var options = name === "zero" ? ["0", "1", "2", "3"] : this.T.choices[name];
      var pairs = options.map(function (o) { return [o, self.optionText(name, o)]; });
      if (name === "node_link") pairs.unshift(["", this.t("plan_auto")]);
      var selected = value === null ? "" : String(value);
      if (field.kind === "switch") {  // true and false name the first two settings
        selected = typeof value === "boolean" ? options[value ? 1 : 0]
          : strip(selected).toLowerCase();
      }
      html = tag("select", { id: id, "data-field": name }, pairs.map(function (o) {
        return tag("option", { value: o[0], selected: o[0] === selected }, esc(o[1]));
      }).join(""));
    } else {
      var shownValue = given === undefined || given === null ? "" : String(given);
      html = tag("input", { id: id, type: "text", spellcheck: "false",
        "data-field": name, value: shownValue });
    }
    return tag("div", { "class": "course-plan-row", "data-row": name }, label + html);
  };

  /** The time section: shown, or folded under a summary when the view opens on memory. */
  View.prototype.timeSection = function (inner) {
    if (this.focus !== "memory") return inner;
    return tag("details", { "class": "course-plan-more", "data-role": "time-section" },
      tag("summary", {}, esc(this.t("plan_more_time"))) + inner);
  };

  View.prototype.build = function (given) {
    var self = this;
    var sets = GROUPS.map(function (g) {
      var rows = g[1].map(function (name) { return self.control(name, given[name]); });
      return tag("fieldset", {}, tag("legend", {}, esc(self.t(g[0]))) + rows.join(""));
    }).join("");
    function p(role) { return tag("p", { "data-role": role }, ""); }
    function div(cls, role) {
      return tag("div", { "class": cls, "data-role": role }, "");
    }
    function bar(role) { return div("course-plan-bar", role); }
    this.root.innerHTML = tag("div", { "class": "course-plan-inputs" }, sets) +
      tag("div",
        { "class": "course-plan-message", "data-role": "message", role: "alert" }, "") +
      tag("div", { "class": "course-plan-results", "data-role": "results" },
        tag("h4", {}, esc(this.t("plan_heading_memory"))) + bar("memory-bar") +
        div("course-plan-legend", "memory-legend") +
        p("verdict") + p("change") + p("host") + this.timeSection(
          tag("h4", {}, esc(this.t("plan_heading_time"))) + bar("time-bar") +
          tag("table", { "class": "course-plan-table" },
            tag("tbody", { "data-role": "time-table" }, "")) +
          p("layout") + p("cp") + p("ep") + p("bubble") + p("dp") + p("train") +
          p("mfu")));
    this.root.addEventListener("change", function (event) {
      var name = event.target.getAttribute("data-field");
      if (!name) return;
      var reset = name === "model" ? FROM_MODEL : name === "gpu" ? FROM_GPU : [];
      reset.forEach(function (n) { self.input(n).value = ""; });
      self.update();
    });
    this.root.addEventListener("input", function (event) {
      if (event.target.type === "text") self.update();
    });
  };

  /** The inputs as the boxes hold them: text as typed, an empty box for the default. */
  View.prototype.inputs = function () {
    var out = {}, self = this;
    this.T.fields.forEach(function (f) {
      var el = self.input(f.name);
      if (!el) return;
      if (f.kind === "bool") out[f.name] = el.checked;
      else out[f.name] = el.value === "" ? null : el.value;
    });
    return out;
  };

  View.prototype.message = function (words) {
    var box = this.q("message");
    box.textContent = words || "";
    box.style.display = words ? "block" : "none";
    this.q("results").style.opacity = words ? "0.35" : "1";
  };

  View.prototype.update = function () {
    var given = this.inputs(), self = this;
    // The latency and bandwidth boxes show for a custom link only.
    var custom = { node_alpha_us: given.node_link, node_beta_gbs: given.node_link,
      net_alpha_us: given.network_link, net_beta_gbs: given.network_link };
    Object.keys(custom).forEach(function (name) {
      var row = self.root.querySelector("[data-row='" + name + "']");
      row.style.display = custom[name] === "custom" ? "" : "none";
    });
    try {
      this.result = plan(given, this.T, this.language);
    } catch (err) {
      if (!(err && err.planError)) throw err;
      this.result = null;
      this.message(this.t("plan_cannot") + " " + err.message);
      this.root.setAttribute("data-fits", "error");
      return;
    }
    this.message("");
    this.placeholders(this.result.setup);
    this.render(this.result);
  };

  /** Each empty box shows, greyed, the value the plan takes for it. */
  View.prototype.placeholders = function (s) {
    var self = this;
    var values = { params: this.short(s.params), layers: s.layers, hidden: s.hidden,
      heads: s.heads, kv_heads: s.kv_heads, mlp: s.mlp, experts: s.experts,
      top_k: s.top_k, expert_params: this.short(s.expert_params), cp: s.cp, ep: s.ep,
      vocab: s.vocab, seq_len: s.seq_len, global_batch: s.global_batch,
      tokens: this.short(s.tokens), gpu_memory_gb: s.capacity / 1e9,
      gpu_tflops: s.peak / 1e12, gpu_hbm_tbs: s.hbm / 1e12, shard: s.shard,
      micro_batches: s.micro_batches, tp_overlap: s.tp_overlap, ep_overlap: s.ep_overlap,
      zero3_live: this.short(s.zero3_live),
      virtual_stages: s.virtual_stages, edge_layers: s.edge_layers,
      node_alpha_us: s.node_link.latency * 1e6,
      node_beta_gbs: s.node_link.bandwidth / 1e9,
      net_alpha_us: s.network_link.latency * 1e6,
      net_beta_gbs: s.network_link.bandwidth / 1e9, gpus_per_node: s.gpus_per_node,
      nodes: s.nodes, tp: s.tp, pp: s.pp, mfu: s.mfu };
    Object.keys(values).forEach(function (name) {
      var el = self.input(name);
      if (el) el.placeholder = String(values[name]);
    });
  };

  /** One bar: a segment per part, its width its share of `scale`. */
  function segments(parts, amount, scale, colour, title) {
    return parts.map(function (part, i) {
      return tag("div", { "class": "course-plan-seg course-plan-c" + colour(i),
        "data-part": part, style: "width:" + (100 * amount(part) / scale) + "%",
        title: title(part) }, "");
    }).join("");
  }

  View.prototype.render = function (r) {
    var self = this, m = r.memory, s = r.setup, time = r.time;
    var gb = function (x) { return self.dec(x / 1e9, 2); };
    var colour = function (i) { return i === 0 ? 5 : i - 1; };
    // Memory: the CUDA context, then the tensors, against the card; the red line marks
    // what tensors may use (the card less the allocator's margin).
    var scale = Math.max(m.capacity, m.total + m.cuda_context);
    var name = function (part) { return self.t("plan_mem_" + part); };
    var held = function (part) { return m[part]; };
    var says = function (part) { return name(part) + ": " + gb(m[part]) + " GB"; };
    this.q("memory-bar").innerHTML = segments(COMPONENTS, held, scale, colour, says) +
      tag("div", { "class": "course-plan-limit",
        style: "left:" + (100 * (m.usable + m.cuda_context) / scale) + "%" }, "");
    this.q("memory-legend").innerHTML = COMPONENTS.map(function (part, i) {
      var swatch = tag("i",
        { "class": "course-plan-swatch course-plan-c" + colour(i) }, "");
      return tag("span", {}, swatch + esc(name(part) + " " + gb(m[part]) + " GB"));
    }).join("");
    var verdict = this.q("verdict");
    verdict.className = m.fits ? "course-plan-fits" : "course-plan-no-fit";
    verdict.textContent = this.t(m.fits ? "plan_fits" : "plan_no_fit",
      { total: gb(m.total), usable: gb(m.usable), gpu: s.gpu_name });
    var c = r.change, change = "";
    if (!m.fits && c === null) change = this.t("plan_change_none");
    if (!m.fits && c !== null) {
      change = this.t("plan_change_" + c.kind,
        { start: c.start, end: c.end, gpus: this.dec(c.gpus, 0) });
    }
    this.q("change").textContent = change;
    var host = m.host ? this.t("plan_host", { host: gb(m.host) }) : "";
    this.q("host").textContent = host;
    // Time: the parts of one step.
    var parts = TIMES.map(function (part) { return part[0]; });
    var took = function (part) { return time[part]; };
    var same = function (i) { return i; };
    var what = function (part) { return self.t(TIMES[parts.indexOf(part)][1]); };
    this.q("time-bar").innerHTML = segments(parts, took, time.step, same, what);
    this.q("time-table").innerHTML = TIMES.concat([["step", "plan_time_step"]])
      .map(function (part, i) {
        var swatch = i < TIMES.length
          ? tag("i", { "class": "course-plan-swatch course-plan-c" + i }, "") : "";
        var seconds = self.dec(time[part[0]], 3) + " s";
        var share = self.pct(time[part[0]] / time.step, 1);
        var cells = tag("td", {}, swatch + esc(self.t(part[1]))) +
          tag("td", { "class": "num" }, esc(seconds)) +
          tag("td", { "class": "num" }, esc(share));
        return tag("tr", { "data-part": part[0] }, cells);
      }).join("");
    var d = function (x) { return self.dec(x, 0); };
    this.q("layout").textContent = this.t(s.cp > 1 ? "plan_layout_cp" : "plan_layout",
      { gpus: d(s.gpus), tp: s.tp, cp: s.cp, pp: s.pp, dp: d(s.dp),
        sp: s.tp > 1 ? " (" + this.t(s.sequence_parallel ? "plan_sp_on" : "plan_sp_off") +
          ")" : "",
        micro: d(s.micro_batches), micro_batch: d(s.micro_batch) });
    var traffic = trafficLines(r, s, time, this.T, function (key, values) {
      return self.t(key, values);
    }, function (x, digits) { return self.dec(x, digits); }, function (x) {
      return self.short(x);
    });
    this.q("cp").textContent = traffic.cp;
    this.q("ep").textContent = traffic.ep;
    this.q("bubble").textContent = this.t("plan_bubble",
      { share: this.pct(time.bubble_share, 1), pp: s.pp, micro: d(s.micro_batches) });
    this.q("dp").textContent = this.t("plan_dp_hidden", { dp: this.dec(time.dp, 3),
      hidden: this.dec(time.dp - time.dp_exposed, 3) });
    var train = s.gpus === 1 ? "plan_train_one" : "plan_train";
    this.q("train").textContent = this.t(train, { days: this.dec(r.days, 1),
      gpus: d(s.gpus), gpu_hours: d(r.gpu_hours), tokens: this.short(s.tokens) });
    this.q("mfu").textContent = this.t("plan_mfu",
      { achieved: this.pct(r.achieved_mfu, 1), assumed: this.pct(s.mfu, 0) });
    this.root.setAttribute("data-fits", m.fits ? "true" : "false");
  };

  /** report._traffic: the lines on context and expert parallelism ("" when unused). */
  function trafficLines(r, s, time, T, t, dec, short) {
    var out = { cp: "", ep: "" };
    if (s.cp > 1) {
      var cpLink = s.tp * s.cp <= s.gpus_per_node ? s.node_link : s.network_link;
      out.cp = t("plan_cp_traffic", { cp: s.cp, mb: dec(time.cp_bytes / 1e6, 1),
        link: cpLink.name, seconds: dec(time.cp, 3) });
    }
    if (s.ep > 1) {
      var epLink = s.tp * s.ep <= s.gpus_per_node ? s.node_link : s.network_link;
      out.ep = t("plan_ep_traffic", { ep: s.ep,
        count: collectivePasses(s, T, "ep"),
        mb: dec(time.ep_bytes / 1e6, 1), link: epLink.name, seconds: dec(time.ep, 3),
        active: short(activeParams(s)), params: short(s.params) });
    }
    return out;
  }

  /**
   * Draw a planner inside an element (or the element with this id), with cfg {inputs,
   * language, tables}; the element's static fallback text (what readers see without
   * JavaScript) makes way.
   */
  function mount(target, cfg) {
    var el = typeof target === "string" ? document.getElementById(target) : target;
    if (!el) return null;
    if (el.__coursePlanner) return el.__coursePlanner;
    var fallback = el.querySelector(".course-plan-static");
    var ui = document.createElement("div");
    ui.className = "course-plan-ui";
    el.appendChild(ui);
    try {
      el.__coursePlanner = new View(ui, cfg || {});
      if (fallback) fallback.parentNode.removeChild(fallback);
    } catch (err) {
      var message = err && err.message ? err.message : String(err);
      var words = cfg && cfg.tables && cfg.tables.texts[cfg.language || "en"];
      ui.textContent = words
        ? fill(words.plan_could_not_start, { error: message }, words) : message;
    }
    return el.__coursePlanner || null;
  }

  var model = {
    plan: plan, check: check, readNumber: readNumber, shown: shown, text: text,
    fill: fill, localise: localise, memoryPerGpu: memoryPerGpu, stepTime: stepTime,
    mount: mount, View: View, version: 1
  };
  root.coursePlanner = root.coursePlanner || {};
  for (var name in model) root.coursePlanner[name] = model[name];
})(typeof window !== "undefined" ? window : globalThis);
