/*
 * The course's bit explorer: an exact number-format codec in JavaScript, and the explorer drawn
 * on top of it. course_lib/numbers/bit_explorer.py inlines this file into every explorer it shows,
 * so the explorer answers clicks in JupyterLab, in Colab and in the static book alike, with no
 * kernel.
 *
 * The codec follows the same rules as course_lib/numbers/formats.py, and the browser tests compare
 * the two on every bit pattern of FP16, BF16, E4M3 and E5M2:
 *   - a float format is 1 sign bit, e exponent bits (bias 2**(e-1)-1 unless given), m mantissa
 *     bits, and a special-value convention: "ieee" (all-ones exponent = inf/NaN), "fn" (OCP E4M3FN:
 *     no inf, NaN only S.1111.111), "fnuz" (no inf, no -0, NaN = 1.000..0) or "none" (all finite);
 *   - encoding rounds to nearest, ties to the even bit pattern, once, straight from the float64
 *     value (exact BigInt arithmetic, so there is no double rounding);
 *   - overflow (a rounded magnitude above max): +-inf in "ieee" formats, NaN in "fn"/"fnuz" formats,
 *     unless saturating (then +-max; "none" formats always saturate);
 *   - integer formats round half to even, then clamp into range; NaN has no integer pattern.
 * Bit patterns are plain numbers (formats of at most 32 bits); values are float64 numbers, exact.
 * The explorer uses the non-saturating mode by default (a checkbox turns saturation on).
 *
 * Words: this file holds none that a learner reads. The explorer takes every label and message
 * from its configuration (cfg.text, one language's texts from course_lib/i18n.py, keys bx_...);
 * the codec's errors that a learner can meet (a bad typed value, a bad custom format) carry a key
 * and values (err.textKey, err.textValues) so the explorer can say them in its language, and their
 * English message comes from window.courseBitText, which course_lib/bit_explorer.py sets before
 * this file. Errors only a programmer can meet (a bad format spec, a bad pattern) stay English here.
 */
(function (root) {
  "use strict";

  // ---------------------------------------------------------------------------------------------
  // float64 <-> bits, exact powers of two
  // ---------------------------------------------------------------------------------------------
  var view = new DataView(new ArrayBuffer(8));

  /** Fill a text's {name} placeholders from values, else from the table's entry of that name. */
  function fill(template, values, table, escape) {
    var keep = escape || function (x) { return x; };
    return String(template).split(/(\{\w+\})/).map(function (piece) {
      var match = /^\{(\w+)\}$/.exec(piece);
      if (!match) return keep(piece);
      var name = match[1];
      if (values && values[name] !== undefined) return String(values[name]);
      if (table && table[name] !== undefined) return keep(table[name]);
      return keep(piece);
    }).join("");
  }

  /** Throw an error a learner can meet: its key and values let the explorer say it in its language. */
  function fail(key, values) {
    var table = root.courseBitText || {};
    var err = new Error(table[key] !== undefined ? fill(table[key], values, table) : key + " " + JSON.stringify(values));
    err.textKey = key;
    err.textValues = values;
    throw err;
  }

  function bits64(x) {
    view.setFloat64(0, x);
    return view.getBigUint64(0);
  }

  function float64(b) {
    view.setBigUint64(0, b);
    return view.getFloat64(0);
  }

  /** Exactly 2**k for -1074 <= k <= 1023 (built from its bits, never rounded). */
  function pow2(k) {
    if (k > 1023) return Infinity;
    if (k >= -1022) return float64(BigInt(k + 1023) << 52n);
    if (k >= -1074) return float64(1n << BigInt(k + 1074));
    return 0;
  }

  function bitLength(n) {
    return n === 0n ? 0 : n.toString(2).length;
  }

  // ---------------------------------------------------------------------------------------------
  // Formats
  // ---------------------------------------------------------------------------------------------
  var NAN_ENCODINGS = ["ieee", "fn", "fnuz", "none"];

  function floatFormat(name, e, m, nan, bias) {
    nan = nan || "ieee";
    if (!Number.isInteger(e) || e < 1 || e > 11) fail("bx_err_exponent_bits", { e: e });
    if (!Number.isInteger(m) || m < 0) fail("bx_err_mantissa_bits", { m: m });
    if (1 + e + m > 32) fail("bx_err_too_many_bits", { e: e, m: m, n: 1 + e + m });
    if (NAN_ENCODINGS.indexOf(nan) < 0) throw new Error("unknown special-value convention " + nan);
    if (nan === "ieee" && m < 1) fail("bx_err_ieee_mantissa", {});
    if (bias === undefined || bias === null) bias = Math.pow(2, e - 1) - 1;
    var n = 1 + e + m;
    var maxPattern;
    if (nan === "ieee") maxPattern = (Math.pow(2, e) - 1) * Math.pow(2, m) - 1;
    else if (nan === "fn") maxPattern = Math.pow(2, e + m) - 2;
    else maxPattern = Math.pow(2, e + m) - 1;
    if (maxPattern < Math.pow(2, m)) {
      fail("bx_err_no_normals", { e: e, m: m });
    }
    var emin = 1 - bias;
    var emax = Math.floor(maxPattern / Math.pow(2, m)) - bias;
    if (emin < -1022 || emax > 1023) fail("bx_err_float64_range", {});
    var fmt = {
      kind: "float", name: name || ("e" + e + "m" + m), e: e, m: m, bias: bias, nan: nan, n: n,
      maxPattern: maxPattern, emin: emin, emax: emax,
      hasInf: nan === "ieee", hasNan: nan !== "none",
      infPattern: nan === "ieee" ? (Math.pow(2, e) - 1) * Math.pow(2, m) : null,
      nanPattern: nan === "ieee" ? (Math.pow(2, e) - 1) * Math.pow(2, m) + Math.pow(2, m - 1)
        : nan === "fn" ? Math.pow(2, e + m) - 1 : nan === "fnuz" ? Math.pow(2, e + m) : null,
    };
    var frac = maxPattern % Math.pow(2, m);
    fmt.max = (Math.pow(2, m) + frac) * pow2(emax - m);
    fmt.minNormal = pow2(emin);
    fmt.minSubnormal = pow2(emin - m);
    fmt.epsilon = pow2(-m);
    return fmt;
  }

  function intFormat(bits, signed) {
    if (!Number.isInteger(bits) || bits < 2 || bits > 32) throw new Error("integer width must be from 2 to 32 bits, got " + bits);
    var lo = signed ? -Math.pow(2, bits - 1) : 0;
    var hi = signed ? Math.pow(2, bits - 1) - 1 : Math.pow(2, bits) - 1;
    return { kind: "int", name: (signed ? "" : "u") + "int" + bits, n: bits, bits: bits, signed: signed, min: lo, max: hi };
  }

  var NAMED = {
    fp32: [8, 23, "ieee"], fp16: [5, 10, "ieee"], bf16: [8, 7, "ieee"], e4m3: [4, 3, "fn"], e5m2: [5, 2, "ieee"],
    e4m3fnuz: [4, 3, "fnuz", 8], e5m2fnuz: [5, 2, "fnuz", 16],
    fp6_e3m2: [3, 2, "none"], fp6_e2m3: [2, 3, "none"], fp4_e2m1: [2, 1, "none"],
  };
  var ALIASES = {
    float32: "fp32", single: "fp32", float16: "fp16", half: "fp16", bfloat16: "bf16", e4m3fn: "e4m3",
    fp8_e4m3: "e4m3", float8_e4m3fn: "e4m3", fp8_e5m2: "e5m2", float8_e5m2: "e5m2",
    float8_e4m3fnuz: "e4m3fnuz", float8_e5m2fnuz: "e5m2fnuz", e2m1: "fp4_e2m1", fp4: "fp4_e2m1",
  };

  /** A format from a name ('fp16', 'e4m3', 'e3m2', 'int8', ...) like format_specs.get_format, or a spec object. */
  function getFormat(spec) {
    if (spec && typeof spec === "object") {
      if (spec.kind === "float" || spec.kind === "int") {
        if (spec.maxPattern !== undefined || spec.min !== undefined) return spec;
        return spec.kind === "int" ? intFormat(spec.bits, spec.signed !== false)
          : floatFormat(spec.name, spec.e, spec.m, spec.nan, spec.bias);
      }
      throw new Error("a format spec needs kind 'float' or 'int'");
    }
    var key = String(spec).trim().toLowerCase().replace(/-/g, "_");
    key = ALIASES[key] || key;
    var named = NAMED[key];
    if (named) return floatFormat(key, named[0], named[1], named[2], named[3]);
    var match = /^e(\d+)m(\d+)(fn|fnuz)?$/.exec(key);
    if (match) return floatFormat(key, Number(match[1]), Number(match[2]), match[3] || "ieee");
    match = /^(u?)int(\d+)$/.exec(key);
    if (match) return intFormat(Number(match[2]), match[1] !== "u");
    throw new Error("unknown format " + JSON.stringify(String(spec)) + "; try fp32, fp16, bf16, e4m3, e5m2, int8, int4 or eXmY");
  }

  // ---------------------------------------------------------------------------------------------
  // Encoding
  // ---------------------------------------------------------------------------------------------
  function roundHalfEven(x) {
    var f = Math.floor(x);
    var d = x - f; // exact for every float64
    if (d > 0.5) return f + 1;
    if (d < 0.5) return f;
    return f % 2 === 0 ? f : f + 1;
  }

  function encodeInt(x, fmt) {
    if (x !== x) fail("bx_err_int_nan", { format: fmt.name.toUpperCase() });
    var q = roundHalfEven(x);
    if (!(q >= fmt.min)) q = fmt.min; // also -inf
    if (!(q <= fmt.max)) q = fmt.max;
    if (q === 0) q = 0; // an integer has one zero: a typed -0 becomes pattern 0 (+0), as in torch and Python
    return q < 0 ? q + Math.pow(2, fmt.bits) : q;
  }

  function encodeFloat(x, fmt, saturate) {
    var e = fmt.e, m = fmt.m, n = fmt.n;
    var b = bits64(x);
    var negative = (b >> 63n) === 1n;
    var sign = negative ? Math.pow(2, n - 1) : 0;
    var mag = b & 0x7fffffffffffffffn;
    var rawE = Number(mag >> 52n);
    var frac = mag & 0xfffffffffffffn;
    var overflowPattern = function () {
      if (saturate || fmt.nan === "none") return sign + fmt.maxPattern;
      if (fmt.nan === "ieee") return sign + fmt.infPattern;
      if (fmt.nan === "fn") return sign + fmt.nanPattern;
      return fmt.nanPattern; // fnuz: the single NaN
    };
    if (rawE === 2047) {
      if (frac !== 0n) { // NaN
        if (fmt.nan === "none") fail("bx_err_no_nan", { format: fmt.name });
        return fmt.nan === "fnuz" ? fmt.nanPattern : sign + fmt.nanPattern;
      }
      return overflowPattern(); // +-inf overflows like any too-large value
    }
    var sig = rawE === 0 ? frac : (frac | (1n << 52n));
    var exp2 = rawE === 0 ? -1074 : rawE - 1075; // |x| = sig * 2**exp2
    if (sig === 0n) return fmt.nan === "fnuz" ? 0 : sign;
    var k = bitLength(sig) - 1 + exp2; // floor(log2 |x|)
    var q = Math.max(k, fmt.emin) - m; // the target's spacing in that binade is 2**q
    var shift = q - exp2;
    var N;
    var tie = false, above = false;
    if (shift <= 0) {
      N = sig << BigInt(-shift);
    } else {
      var s = BigInt(shift);
      N = sig >> s;
      var rem = sig - (N << s);
      var half = 1n << (s - 1n);
      above = rem > half;
      tie = rem === half;
    }
    var one = 1n << BigInt(m);
    var pattern = function (Nv, qv) { // magnitude pattern of Nv * 2**qv (Nv < 2**(m+2))
      if (Nv >= (one << 1n)) { Nv >>= 1n; qv += 1; }
      if (Nv < one) return Number(Nv); // subnormal or zero
      return (qv + m + fmt.bias) * Math.pow(2, m) + Number(Nv - one);
    };
    var p = pattern(N, q);
    if (above || (tie && p % 2 === 1)) p = pattern(N + 1n, q); // ties go to the even pattern
    if (p === 0) return fmt.nan === "fnuz" ? 0 : sign;
    if (p > fmt.maxPattern) return overflowPattern();
    return sign + p;
  }

  /** Round a float64 to the nearest value of fmt (ties to even) and return its bit pattern. */
  function encode(value, fmt, saturate) {
    fmt = getFormat(fmt);
    var x = Number(value);
    if (fmt.kind === "int") return encodeInt(x, fmt);
    return encodeFloat(x, fmt, !!saturate);
  }

  // ---------------------------------------------------------------------------------------------
  // Decoding
  // ---------------------------------------------------------------------------------------------
  function checkPattern(bits, fmt) {
    if (!Number.isInteger(bits) || bits < 0 || bits >= Math.pow(2, fmt.n)) {
      throw new Error("bit pattern " + bits + " is out of range for " + fmt.name + ": valid patterns are 0.." + (Math.pow(2, fmt.n) - 1));
    }
  }

  /** The exact value a bit pattern stores, as a float64 (keeps -0; NaN for NaN patterns). */
  function decode(bits, fmt) {
    fmt = getFormat(fmt);
    checkPattern(bits, fmt);
    var half = Math.pow(2, fmt.n - 1);
    if (fmt.kind === "int") return fmt.signed && bits >= half ? bits - 2 * half : bits;
    var negative = bits >= half;
    var mag = negative ? bits - half : bits;
    var unit = Math.pow(2, fmt.m);
    var raw = Math.floor(mag / unit);
    var frac = mag % unit;
    if (fmt.nan === "fnuz" && bits === half) return NaN;
    if (fmt.nan === "ieee" && raw === Math.pow(2, fmt.e) - 1) {
      return frac === 0 ? (negative ? -Infinity : Infinity) : NaN;
    }
    if (fmt.nan === "fn" && mag === half - 1) return NaN;
    var sig = raw > 0 ? unit + frac : frac;
    var v = sig * pow2(Math.max(raw, 1) - fmt.bias - fmt.m); // exact: a power of two times < 2**24
    return negative ? -v : v;
  }

  // ---------------------------------------------------------------------------------------------
  // Anatomy, neighbours, spacing, exact decimals
  // ---------------------------------------------------------------------------------------------
  /** Sign, exponent and mantissa fields of one float pattern, and what kind of value it is. */
  function fields(bits, fmt) {
    fmt = getFormat(fmt);
    if (fmt.kind !== "float") throw new Error("fields() needs a floating-point format");
    checkPattern(bits, fmt);
    var half = Math.pow(2, fmt.n - 1), unit = Math.pow(2, fmt.m);
    var sign = bits >= half ? 1 : 0;
    var mag = bits - sign * half;
    var raw = Math.floor(mag / unit), frac = mag % unit;
    var value = decode(bits, fmt);
    return {
      sign: sign, rawExponent: raw, exponent: raw ? raw - fmt.bias : fmt.emin, mantissa: frac,
      implicitBit: raw ? 1 : 0, isSubnormal: raw === 0 && frac !== 0, isNan: value !== value,
      isInf: value === Infinity || value === -Infinity, isZero: value === 0, value: value,
    };
  }

  /** Binary digits of a pattern, fields split by sep: FP16(1.0) -> '0 01111 0000000000'. */
  function bitString(bits, fmt, sep) {
    fmt = getFormat(fmt);
    checkPattern(bits, fmt);
    if (sep === undefined) sep = " ";
    var digits = bits.toString(2).padStart(fmt.n, "0");
    if (fmt.kind === "int") return digits;
    var parts = [digits.slice(0, 1), digits.slice(1, 1 + fmt.e)];
    if (fmt.m) parts.push(digits.slice(1 + fmt.e));
    return parts.join(sep);
  }

  function step(x, fmt, up) {
    fmt = getFormat(fmt);
    if (fmt.kind !== "float") throw new Error("next_up()/next_down() need a floating-point format");
    if (x !== x) return NaN;
    var p = encodeFloat(x, fmt, true); // the nearest finite value
    var v = decode(p, fmt);
    var half = Math.pow(2, fmt.n - 1);
    var order = p >= half ? -(p - half) : p; // patterns in value order, +-0 both 0
    if (up && v <= x) order += 1;
    if (!up && v >= x) order -= 1;
    var top = fmt.hasInf ? fmt.infPattern : fmt.maxPattern;
    if (Math.abs(order) > top) return NaN; // past max in a format without inf
    var res = order < 0 ? half - order : order;
    if (order === 0 && x < 0 && fmt.nan !== "fnuz") res = half; // stepping onto zero keeps the side
    return decode(res, fmt);
  }

  /** Smallest fmt value strictly above x (inf above max in IEEE formats, NaN where there is none). */
  function nextUp(x, fmt) { return step(Number(x), fmt, true); }

  /** Largest fmt value strictly below x. */
  function nextDown(x, fmt) { return step(Number(x), fmt, false); }

  /** Gap between consecutive fmt values in |x|'s binade: 2**(max(floor(log2|x|), emin) - m). */
  function ulp(x, fmt) {
    fmt = getFormat(fmt);
    if (fmt.kind === "int") return 1;
    x = Number(x);
    if (!isFinite(x)) return NaN;
    var binade = fmt.emin;
    if (x !== 0) {
      var b = bits64(Math.abs(x));
      var raw = Number(b >> 52n);
      binade = raw ? raw - 1023 : bitLength(b) - 1 - 1074;
    }
    binade = Math.min(Math.max(binade, fmt.emin), fmt.emax);
    return pow2(binade - fmt.m);
  }

  /** The exact decimal expansion of a float64 (every binary float is a finite decimal). */
  function exactDecimal(x) {
    x = Number(x);
    if (x !== x) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    var b = bits64(x);
    var negative = (b >> 63n) === 1n;
    var raw = Number((b >> 52n) & 0x7ffn);
    var frac = b & 0xfffffffffffffn;
    var sig = raw ? (frac | (1n << 52n)) : frac;
    var exp2 = raw ? raw - 1075 : -1074;
    var text;
    if (sig === 0n) {
      text = "0";
    } else if (exp2 >= 0) {
      text = (sig << BigInt(exp2)).toString();
    } else {
      while ((sig & 1n) === 0n && exp2 < 0) { sig >>= 1n; exp2 += 1; } // shortest exact form
      if (exp2 >= 0) {
        text = (sig << BigInt(exp2)).toString();
      } else {
        var places = -exp2; // sig / 2**p = sig * 5**p / 10**p
        var digits = (sig * 5n ** BigInt(places)).toString().padStart(places + 1, "0");
        text = digits.slice(0, digits.length - places) + "." + digits.slice(digits.length - places);
      }
    }
    return (negative ? "-" : "") + text;
  }

  // ---------------------------------------------------------------------------------------------
  // Reading what the learner types
  // ---------------------------------------------------------------------------------------------
  /**
   * Read a typed value: a decimal number (3.14, 1e-8, -0), pi / e (also with a sign), inf, nan,
   * 2^k, or a bit pattern of fmt written in hex (0x4248) or binary (0b0100...). Returns
   * {value, pattern, label} (pattern is null unless bits were typed) or throws with a message.
   */
  function parseValue(text, fmt) {
    fmt = getFormat(fmt);
    var raw = String(text).trim();
    var s = raw.toLowerCase().replace(/\s+/g, "");
    if (!s) fail("bx_err_empty", {});
    var patternMatch = /^0x([0-9a-f]+)$/.exec(s) || /^0b([01]+)$/.exec(s);
    if (patternMatch) {
      var digits = patternMatch[1];
      var pattern = parseInt(digits, s[1] === "x" ? 16 : 2);
      var limit = Math.pow(2, fmt.n) - 1;
      if (!(pattern <= limit)) {
        fail("bx_err_too_wide", { text: raw, n: fmt.n, format: fmt.name.toUpperCase(), limit: limit.toString(16).toUpperCase() });
      }
      return { value: decode(pattern, fmt), pattern: pattern, label: raw };
    }
    var sign = 1, body = s;
    if (body[0] === "+" || body[0] === "-") { sign = body[0] === "-" ? -1 : 1; body = body.slice(1); }
    var value = null;
    if (body === "pi" || body === "\u03c0") value = Math.PI;
    else if (body === "e") value = Math.E;
    else if (body === "inf" || body === "infinity" || body === "\u221e") value = Infinity;
    else if (body === "nan") value = NaN;
    else if (/^(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/.test(body)) value = Number(body);
    else {
      var power = /^2(\^|\*\*)([+-]?\d+)$/.exec(body);
      if (power) {
        var k = Number(power[2]);
        if (k < -1074 || k > 1023) fail("bx_err_power_range", { k: k });
        value = pow2(k);
      }
    }
    if (value === null) fail("bx_err_unreadable", { text: "'" + raw + "'" });
    return { value: sign < 0 ? -value : value, pattern: null, label: raw, negativeNan: value !== value && sign < 0 };
  }

  function encodeMany(values, fmt, saturate) {
    fmt = getFormat(fmt);
    return values.map(function (v) { return encode(v, fmt, saturate); });
  }

  function decodeMany(patterns, fmt) {
    fmt = getFormat(fmt);
    return patterns.map(function (p) { return decode(p, fmt); });
  }

  var codec = {
    version: 1, getFormat: getFormat, encode: encode, decode: decode, encodeMany: encodeMany,
    decodeMany: decodeMany, fields: fields, bitString: bitString, nextUp: nextUp, nextDown: nextDown,
    ulp: ulp, exactDecimal: exactDecimal, parseValue: parseValue, pow2: pow2,
  };
  root.courseBitCodec = codec;

  // ---------------------------------------------------------------------------------------------
  // The explorer
  // ---------------------------------------------------------------------------------------------
  // The format selector: [key, label]; a label that is a text key is said in the explorer's language.
  var CHOICES = [
    ["fp32", "FP32 (E8M23)"], ["fp16", "FP16 (E5M10)"], ["bf16", "BF16 (E8M7)"], ["e4m3", { key: "bx_choice_e4m3" }],
    ["e5m2", "FP8 E5M2"], ["int8", "INT8"], ["int4", "INT4"], ["custom", { key: "bx_choice_custom" }],
  ];
  var COLOURS = { sign: "#c0392b", exponent: "#1f6fb2", mantissa: "#1e8449", int: "#7d3c98" };

  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function show(x) { // a float64 as its shortest round-trip decimal
    if (x !== x) return "NaN";
    if (x === 0) return 1 / x < 0 ? "-0" : "0";
    return String(x);
  }

  function approx(x) { // 4 significant digits for errors
    if (x !== x) return "NaN";
    if (x === 0) return "0";
    if (!isFinite(x)) return x > 0 ? "inf" : "-inf";
    var a = Math.abs(x);
    return a >= 1e-3 && a < 1e6 ? String(Number(x.toPrecision(4))) : x.toExponential(3).replace("e", "\u00d710^");
  }

  function powText(k) { return "2^" + k; }

  function fieldOf(fmt, i) { // i counts bits from the top (0 = sign)
    if (fmt.kind === "int") return i === 0 && fmt.signed ? "sign" : "int";
    if (i === 0) return "sign";
    return i <= fmt.e ? "exponent" : "mantissa";
  }

  function Explorer(rootEl, cfg) {
    this.root = rootEl;
    this.saturate = !!cfg.saturate;
    this.text = cfg.text || {};
    this.build(cfg);
  }

  Explorer.prototype.q = function (role) { return this.root.querySelector("[data-role='" + role + "']"); };

  /** One text of the explorer's language, placeholders filled (plain text: escape it before use as HTML). */
  Explorer.prototype.t = function (key, values) {
    return fill(this.text[key] !== undefined ? this.text[key] : key, values, this.text);
  };

  /** One text as HTML: its words escaped, its values inserted as given (callers pass HTML). */
  Explorer.prototype.html = function (key, values) {
    return fill(this.text[key] !== undefined ? this.text[key] : key, values, this.text, esc);
  };

  /** A number inside a sentence, with the language's decimal point (3,140625 in Dutch). */
  Explorer.prototype.prose = function (numberText) {
    var point = this.text.decimal_point || ".";
    return String(numberText).replace(".", point);
  };

  /** What an error says in the explorer's language (the codec's message when it has no text key). */
  Explorer.prototype.errorText = function (err) {
    if (err && err.textKey && this.text[err.textKey] !== undefined) return this.t(err.textKey, err.textValues);
    return err && err.message ? err.message : String(err);
  };

  Explorer.prototype.build = function (cfg) {
    var self = this;
    var start = getFormat(cfg.format || "fp16");
    var options = CHOICES.map(function (c) { return [c[0], typeof c[1] === "string" ? c[1] : self.t(c[1].key)]; });
    var known = options.some(function (c) { return c[0] === start.name; });
    var custom = !known && start.kind === "float" && start.nan === "ieee" && start.bias === Math.pow(2, start.e - 1) - 1;
    this.extraFormats = {};
    if (!known && !custom) {
      options.splice(options.length - 1, 0, [start.name, start.name.toUpperCase()]);
      this.extraFormats[start.name] = start;
    }
    var selected = custom ? "custom" : start.name;
    var select = options.map(function (c) {
      return "<option value='" + esc(c[0]) + "'" + (c[0] === selected ? " selected" : "") + ">" + esc(c[1]) + "</option>";
    }).join("");
    var e0 = start.kind === "float" ? start.e : 4, m0 = start.kind === "float" ? start.m : 3;
    this.root.innerHTML =
      "<div class='course-bitx-controls'>" +
      "<label>" + esc(this.t("bx_value")) + " <input data-role='value' type='text' size='14' spellcheck='false' value='" + esc(cfg.value) + "'></label> " +
      "<label>" + esc(this.t("bx_format")) + " <select data-role='format'>" + select + "</select></label> " +
      "<span data-role='custom' style='display:" + (custom ? "inline" : "none") + "'>" +
      "<label>E <input data-role='ebits' type='number' min='1' max='11' value='" + e0 + "' style='width:3.5em'></label> " +
      "<label>M <input data-role='mbits' type='number' min='0' max='23' value='" + m0 + "' style='width:3.5em'></label></span> " +
      "<label title='" + esc(this.t("bx_saturate_title")) + "'>" +
      "<input data-role='saturate' type='checkbox'" + (this.saturate ? " checked" : "") + "> " + esc(this.t("bx_saturate")) + "</label>" +
      "</div>" +
      "<div class='course-bitx-message' data-role='message' role='alert'></div>" +
      "<div class='course-bitx-bits' data-role='bits'></div>" +
      "<div class='course-bitx-anatomy' data-role='anatomy'></div>" +
      "<table class='course-bitx-table'><tbody data-role='table'></tbody></table>" +
      "<div class='course-bitx-note'>" + this.html("bx_note", { saturate: "<i>" + esc(this.t("bx_saturate")) + "</i>" }) + "</div>";
    var guard = function (fn) {
      return function (event) {
        try { fn.call(self, event); } catch (err) { self.message(self.errorText(err)); }
      };
    };
    var input = this.q("value");
    input.addEventListener("change", guard(this.onValue));
    input.addEventListener("keydown", guard(function (ev) { if (ev.key === "Enter") this.onValue(); }));
    this.q("format").addEventListener("change", guard(this.onFormat));
    this.q("ebits").addEventListener("change", guard(this.onFormat));
    this.q("mbits").addEventListener("change", guard(this.onFormat));
    this.q("saturate").addEventListener("change", guard(function () {
      this.saturate = this.q("saturate").checked;
      this.reencode();
    }));
    this.q("bits").addEventListener("click", guard(function (ev) {
      var target = ev.target.closest ? ev.target.closest("[data-bit]") : null;
      if (!target) return;
      this.flip(Number(target.getAttribute("data-bit")));
    }));
    this.fmt = start;
    this.ref = null;
    try {
      this.onValue();
    } catch (err) {
      this.message(this.errorText(err));
    }
  };

  Explorer.prototype.message = function (text) {
    var box = this.q("message");
    box.textContent = text || "";
    box.style.display = text ? "block" : "none";
  };

  Explorer.prototype.readFormat = function () {
    var key = this.q("format").value;
    this.q("custom").style.display = key === "custom" ? "inline" : "none";
    if (key !== "custom") return this.extraFormats[key] || getFormat(key);
    var e = Number(this.q("ebits").value), m = Number(this.q("mbits").value);
    return floatFormat("e" + e + "m" + m, e, m, "ieee");
  };

  Explorer.prototype.onValue = function () {
    var parsed = parseValue(this.q("value").value, this.fmt);
    this.ref = parsed;
    if (parsed.pattern !== null) {
      this.bits = parsed.pattern;
      this.message("");
      this.render();
    } else {
      this.reencode();
    }
  };

  Explorer.prototype.onFormat = function () {
    var fmt = this.readFormat();
    var ref = this.ref;
    if (ref && ref.pattern !== null) { // typed bits: carry their value to the new format
      ref = { value: ref.value, pattern: null, label: show(ref.value), negativeNan: false };
    }
    this.fmt = fmt;
    this.ref = ref;
    if (!ref) return this.onValue();
    this.reencode();
  };

  Explorer.prototype.reencode = function () {
    if (!this.ref) return;
    var ref = this.ref, fmt = this.fmt;
    var pattern = encode(ref.value, fmt, this.saturate);
    if (ref.negativeNan && fmt.kind === "float" && fmt.nan !== "fnuz" && pattern < Math.pow(2, fmt.n - 1)) {
      pattern += Math.pow(2, fmt.n - 1);
    }
    this.bits = pattern;
    this.message("");
    this.render();
  };

  Explorer.prototype.flip = function (i) { // i counts from the top bit
    var weight = Math.pow(2, this.fmt.n - 1 - i);
    var on = Math.floor(this.bits / weight) % 2 === 1;
    this.bits += on ? -weight : weight;
    this.message("");
    this.render();
  };

  Explorer.prototype.render = function () {
    var fmt = this.fmt, bits = this.bits, self = this;
    var digits = bits.toString(2).padStart(fmt.n, "0");
    var html = "";
    for (var i = 0; i < fmt.n; i++) {
      var field = fieldOf(fmt, i);
      var weight = fmt.n - 1 - i;
      var title = field === "sign" ? (fmt.kind === "int" ? this.t("bx_title_sign_int", { weight: weight }) : this.t("bx_title_sign"))
        : field === "exponent" ? this.t("bx_title_exponent", { k: fmt.e - i })
          : field === "mantissa" ? this.t("bx_title_mantissa", { k: i - fmt.e }) : this.t("bx_title_int", { weight: weight });
      var gap = (fmt.kind === "float" && (i === 1 || i === fmt.e + 1)) ? " course-bitx-gap" : "";
      html += "<button type='button' class='course-bitx-bit course-bitx-" + field + (digits[i] === "1" ? " course-bitx-on" : "") + gap +
        "' data-bit='" + i + "' data-field='" + field + "' title='" + esc(title) + "' style='--course-bitx-colour:" + COLOURS[field] + "'>" +
        digits[i] + "</button>";
    }
    var swatch = function (field, key, values) {
      return "<span style='color:" + COLOURS[field] + "'>&#9632; " + esc(self.t(key, values)) + "</span>";
    };
    var size = { n: fmt.n, bytes: this.prose(String(fmt.n / 8)) };
    html += "<div class='course-bitx-legend'>" +
      (fmt.kind === "float"
        ? swatch("sign", "bx_legend_sign") + " " + swatch("exponent", "bx_legend_exponent", { e: fmt.e, bias: fmt.bias }) + " " +
        swatch("mantissa", "bx_legend_mantissa", { m: fmt.m })
        : swatch("sign", "bx_legend_twos") + " " + swatch("int", "bx_legend_value_bits")) +
      " &middot; " + esc(this.t(fmt.n === 8 ? "bx_legend_size_one" : "bx_legend_size_many", size)) + "</div>";
    this.q("bits").innerHTML = html;
    this.q("anatomy").innerHTML = fmt.kind === "float" ? this.anatomyFloat() : this.anatomyInt();
    this.q("table").innerHTML = this.rows().map(function (r) {
      return "<tr><th>" + esc(r[0]) + "</th><td data-role='" + r[1] + "'>" + esc(r[2]) + "</td></tr>";
    }).join("");
    this.root.setAttribute("data-bits", String(bits));
  };

  // The anatomy line is prose: its decimal numbers follow the language (this.prose).
  Explorer.prototype.anatomyFloat = function () {
    var fmt = this.fmt, f = fields(this.bits, fmt), p = this.prose.bind(this);
    var digits = bitString(this.bits, fmt, " ").split(" ");
    var sign = this.t(f.sign ? "bx_sign_negative" : "bx_sign_positive", { bit: digits[0] });
    if (f.isNan) return esc(sign + " \u00b7 " + this.t(fmt.nan === "ieee" ? "bx_nan_ieee" : fmt.nan === "fn" ? "bx_nan_fn" : "bx_nan_fnuz"));
    if (f.isInf) return esc(sign + " \u00b7 " + this.t("bx_infinity"));
    var expText = f.rawExponent
      ? this.t("bx_exponent_normal", { bits: digits[1], raw: f.rawExponent, bias: fmt.bias, power: powText(f.exponent) })
      : this.t("bx_exponent_subnormal", { bits: digits[1], power: powText(fmt.emin) });
    var frac = fmt.m ? digits[2] : "";
    var significand = exactDecimal((f.implicitBit * Math.pow(2, fmt.m) + f.mantissa) * pow2(-fmt.m));
    var manText = this.t("bx_significand", { bits: p(f.implicitBit + (fmt.m ? "." + frac : "")), value: p(significand) });
    var value = (f.sign ? "\u2212" : "+") + p(significand) + " \u00d7 " + powText(f.exponent) + " = " + p(show(f.value));
    return esc(sign + " \u00b7 " + expText + " \u00b7 " + manText) + "<br>" + esc(this.t("bx_value_is", { value: value }));
  };

  Explorer.prototype.anatomyInt = function () {
    var fmt = this.fmt, v = decode(this.bits, fmt);
    var text = fmt.signed ? this.t("bx_twos_complement", { top: fmt.n - 1, next: fmt.n - 2 }) : this.t("bx_unsigned");
    return esc(text + " \u00b7 " + this.t("bx_value_is", { value: v }));
  };

  // The table's values keep their decimal point in every language: they are meant to be copied.
  Explorer.prototype.rows = function () {
    var fmt = this.fmt, bits = this.bits, ref = this.ref, t = this.t.bind(this);
    var v = decode(bits, fmt);
    var name = fmt.name.toUpperCase();
    var hexDigits = Math.ceil(fmt.n / 4);
    var rows = [
      [t("bx_row_stored"), "stored", show(v)],
      [t("bx_row_exact"), "exact", exactDecimal(v)],
      [t("bx_row_bits"), "hex", "0x" + bits.toString(16).toUpperCase().padStart(hexDigits, "0") + "  (" + bitString(bits, fmt, " ") + ")"],
    ];
    if (ref) {
      var x = ref.value;
      var typed = ref.pattern !== null ? t("bx_typed_bits", { text: ref.label, value: show(x) }) : ref.label + " \u2192 float64 " + show(x);
      rows.push([t("bx_row_typed"), "typed", typed]);
      var abs = v - x, rel = abs / x;
      if (x !== x || v !== v) { rows.push([t("bx_row_abserr"), "abserr", t("bx_undefined_nan")]); rows.push([t("bx_row_relerr"), "relerr", t("bx_undefined_nan")]); }
      else if (!isFinite(x) || !isFinite(v)) {
        var same = x === v;
        rows.push([t("bx_row_abserr"), "abserr", same ? "0" : t("bx_infinite", { typed: show(x), stored: show(v) })]);
        rows.push([t("bx_row_relerr"), "relerr", same ? "0" : t("bx_undefined")]);
      } else {
        var error = approx(Math.abs(abs));
        rows.push([t("bx_row_abserr"), "abserr", t(abs ? (abs > 0 ? "bx_error_larger" : "bx_error_smaller") : "bx_error_exact", { error: error })]);
        rows.push([t("bx_row_relerr"), "relerr", x === 0 ? (v === 0 ? "0" : t("bx_undefined_zero")) : approx(Math.abs(rel))]);
      }
      var note = this.outcome(x, v);
      if (note) rows.push([t("bx_row_outcome"), "outcome", note]);
    }
    if (fmt.kind === "float") {
      var u = ulp(v, fmt);
      rows.push([t("bx_row_ulp"), "ulp", u === u ? show(u) + " = " + powText(Math.round(Math.log2(u))) : t("bx_undefined_at", { value: show(v) })]);
      var prev = v === v ? nextDown(v, fmt) : NaN, next = v === v ? nextUp(v, fmt) : NaN;
      rows.push([t("bx_row_prev"), "prev", v !== v ? t("bx_none_nan") : prev !== prev ? t("bx_none_below", { format: name }) : show(prev)]);
      rows.push([t("bx_row_next"), "next", v !== v ? t("bx_none_nan") : next !== next ? t("bx_none_above", { format: name }) : show(next)]);
      var maxExact = exactDecimal(fmt.max);
      rows.push([t("bx_row_max"), "max", show(fmt.max) + (maxExact === show(fmt.max) ? "" : " (" + maxExact + ")")]);
      rows.push([t("bx_row_minnormal"), "minnormal", show(fmt.minNormal) + " = " + powText(fmt.emin)]);
      rows.push([t("bx_row_minsub"), "minsub", show(fmt.minSubnormal) + " = " + powText(fmt.emin - fmt.m)]);
      rows.push([t("bx_row_eps"), "eps", show(fmt.epsilon) + " = " + powText(-fmt.m)]);
      rows.push([t("bx_row_specials"), "specials", t(fmt.nan === "ieee" ? "bx_specials_ieee" : fmt.nan === "fn" ? "bx_specials_fn" : fmt.nan === "fnuz" ? "bx_specials_fnuz" : "bx_specials_none")]);
    } else {
      rows.push([t("bx_row_ulp"), "ulp", "1"]);
      rows.push([t("bx_row_prev"), "prev", v > fmt.min ? String(v - 1) : t("bx_none_min", { value: v })]);
      rows.push([t("bx_row_next"), "next", v < fmt.max ? String(v + 1) : t("bx_none_max", { value: v })]);
      rows.push([t("bx_row_range"), "max", fmt.min + " .. " + fmt.max]);
    }
    return rows;
  };

  // "What happened" is a sentence: its decimal numbers follow the language (this.prose).
  Explorer.prototype.outcome = function (x, v) {
    var fmt = this.fmt, name = fmt.name.toUpperCase(), t = this.t.bind(this), p = this.prose.bind(this);
    if (x !== x || this.ref.pattern !== null) return "";
    if (fmt.kind === "int") {
      var rounded = roundHalfEven(x);
      if (!(rounded >= fmt.min && rounded <= fmt.max)) return t("bx_clamped", { value: p(show(x)), min: fmt.min, max: fmt.max });
      return v === x ? "" : t("bx_rounded_int");
    }
    if (isFinite(x) && Math.abs(x) > fmt.max && v !== v) return t("bx_overflow_nan", { max: p(show(fmt.max)), format: name });
    if (isFinite(x) && !isFinite(v)) return t("bx_overflow", { max: p(show(fmt.max)), stored: show(v) });
    if (Math.abs(x) > fmt.max && Math.abs(v) === fmt.max) return t("bx_saturated");
    if (!isFinite(x) && v !== v) return t("bx_inf_to_nan", { format: name });
    if (x !== 0 && v === 0) return t("bx_underflow");
    if (v !== 0 && Math.abs(v) < fmt.minNormal) return t("bx_subnormal", { min: p(show(fmt.minNormal)) });
    return v === x ? t("bx_stored_exactly") : "";
  };

  /**
   * Draw an explorer inside an element (or the element with this id), with cfg {value, format,
   * saturate, text}: text holds every word it shows, in one language (course_lib/i18n.py). The
   * element's static fallback text (what readers see without JavaScript) is replaced by the live
   * explorer; its <style> stays.
   */
  function mount(target, cfg) {
    var el = typeof target === "string" ? document.getElementById(target) : target;
    if (!el) return null;
    if (el.__courseBitExplorer) return el.__courseBitExplorer;
    var fallback = el.querySelector(".course-bitx-static");
    var ui = document.createElement("div");
    ui.className = "course-bitx-ui";
    el.appendChild(ui);
    try {
      el.__courseBitExplorer = new Explorer(ui, cfg || {});
      if (fallback) fallback.parentNode.removeChild(fallback);
    } catch (err) {
      var text = (cfg && cfg.text) || {};
      var message = err && err.message ? err.message : String(err);
      var key = "bx_could_not_start";
      ui.textContent = text[key] !== undefined ? fill(text[key], { error: message }, text) : message;
    }
    return el.__courseBitExplorer || null;
  }

  root.courseBitExplorer = { mount: mount, Explorer: Explorer, version: 1 };
})(typeof window !== "undefined" ? window : globalThis);
