#!/usr/bin/env python3
"""The figures, the verdicts and the report of scripts/gpu-check.sh run.

The shell runs the programs; each step leaves WORK/steps/NN-NAME, key=value lines:
  name, title         the step
  started=1           it ran (absent: skipped before it began, status and reason say why)
  status, reason      where the shell decided (a tool missing, no data, simulated)
  seconds             how long it took
  cmd=LOG\tEXIT\tSECONDS\tCOMMAND   one a line, in order (LOG empty: a command noted only)
  fact.KEY=VALUE      what no log holds (nvidia-smi fields, lists, versions)
and WORK/LOG the output of each command; WORK/run holds the run's facts. Commands:
  gpu_report.py line STEPFILE        the step's status line (stderr)
  gpu_report.py report WORK OUTDIR   OUTDIR/report.json and report.md; exit 1 when a step failed
  gpu_report.py steps REPORT.JSON    "MODE DRY_RUN", then STATUS\tNAME\tSECONDS\tREASON a step
Standard library only: the GPU machine has a bare python3.
"""
import json, os, re, socket, sys, time
from collections import Counter


def read_kv(path):
    return [tuple(line.split("=", 1)) for line in read(path).split("\n") if "=" in line]


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def lines_of(text):
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def last_line(text):  # tail -n 1
    return lines_of(text)[-1]


def first(pattern, text, group=1, default=""):
    for line in lines_of(text):
        m = re.match(pattern, line)
        if m:
            return m.group(group)
    return default


def obj(line):
    """A JSON object on one line, numbers kept as written (54.900 stays 54.900), or {}."""
    try:
        o = json.loads(line.strip().rstrip(","), parse_float=str, parse_int=str)
    except ValueError:
        return {}
    return o if isinstance(o, dict) else {}


def num(v):  # awk's a + 0: the leading number, else 0
    m = re.match(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", str(v))
    return float(m.group(0)) if m else 0.0


def calc(fmt, f):  # a printf of a computed value, '?' when the inputs are missing
    try:
        return fmt % f()
    except (ValueError, TypeError, ZeroDivisionError):
        return "?"


def semi(items):  # paste -sd ';' | sed 's/;/; /g', as the report always had it
    return ";".join(items).replace(";", "; ")


class Step:
    def __init__(self, path):
        self.dir = os.path.dirname(os.path.dirname(path))
        kv = read_kv(path)
        d = dict(kv)
        self.name, self.title = d.get("name", "?"), d.get("title", "")
        self.started = "started" in d
        self.status, self.reason = d.get("status", ""), d.get("reason", "")
        self.seconds = d.get("seconds", "0.0")
        self.facts = {k[5:]: v for k, v in kv if k.startswith("fact.")}
        self.cmds = [(v.split("\t", 3) + ["", "", ""])[:4] for k, v in kv if k == "cmd"]
        self.rcs = {c[0]: c[1] for c in self.cmds if c[0]}
        self.figs = []

    def fig(self, key, value):
        self.figs.append((key, str(value)))

    def text(self, log):
        return read(os.path.join(self.dir, log))

    def judge(self, run):
        if not self.started:
            return
        try:
            verdict = JUDGES[self.name](self, run)
        except Exception as e:  # output nobody foresaw fails its step, not the report
            verdict = "fail", "gpu_report.py: %s: %s" % (type(e).__name__, e)
            self.status = ""
        if not self.status:
            self.status, self.reason = verdict if verdict else ("ok", "")


# ---- each step: figures from its logs and facts, and its verdict when the shell gave none ----

def j_info(s, run):
    out, rc = s.text("info.log"), s.rcs.get("info.log", "")
    s.fig("version", first(r"^ferry (.*)", out))
    s.fig("build", first(r"^build: (.*)", out))
    s.fig("distributed", first(r"^distributed: (.*)", out))
    cuda = [l.lstrip(" ") for l in lines_of(out) if re.match(r"^ +cuda:[0-9]", l)]
    devs = [re.sub(r" \(simulated:.*", " (simulated)", l.lstrip(" ")) for l in lines_of(out)
            if re.match(r"^ +(cpu|cuda:)", l)]
    s.fig("devices", semi(devs))
    s.fig("pinned", first(r"^pinned memory: (.*)", out))
    for k, v in s.facts.items():  # lscpu's topology: the loader's figure reads against physical cores
        if k.startswith("cpu_"):
            s.fig(k, v)
    if rc != "0":
        return "fail", "ferry info exited with %s" % rc
    if not cuda:
        return "fail", "no CUDA device listed (%s)" % first(r"^.*no CUDA device.*$", out, 0).lstrip(" ")
    if run.simulated and "simulated" not in "\n".join(cuda):
        return "fail", "FERRY_SIM_GPUS is set but cuda:0 is not marked simulated"
    if not run.simulated and "simulated" in "\n".join(cuda):
        return "fail", "cuda:0 is the simulated GPU"


def j_gpu(s, run):
    s.fig("cpu", run.cpu)
    s.fig("memory", run.memory)
    if s.status:
        return
    for k, v in s.facts.items():  # the nvidia-smi fields and the NUMA node, in the shell's order
        if k != "nvcc":
            s.fig(k, v)
    if "nvidia-smi.log" in s.rcs:
        s.fig("cuda_driver_api", run.gpu_cuda or "unknown")
    if "nvcc" in s.facts:
        s.fig("nvcc", s.facts["nvcc"])
    if s.facts.get("name", "unknown") == "unknown":
        return "fail", "nvidia-smi did not name the GPU"


def j_tests(s, run):
    for k in ("not_run", "dry_run"):
        if k in s.facts:
            s.fig(k, s.facts[k])
    progs = [c for c in s.cmds if c[0].startswith("test-")]
    if s.status or not progs:
        return
    total, bad, nodev, reasons = [0, 0, 0], [], [], []
    for log, rc, _, _ in progs:
        n, out = log[5:-4], s.text(log)
        last = last_line(out)
        if re.fullmatch(r".* passed, .* failed, .* skipped", last, re.S):
            w = last.split()
            for i in range(3):
                total[i] += int(w[2 * i]) if w[2 * i].isdigit() else 0
            if w[2] != "0":
                fails = ",".join(l[6:] for l in lines_of(out) if l.startswith("FAIL ")).replace(",", ", ")
                bad.append("%s (%s failed: %s)" % (n, w[2], fails))
        else:
            total[1] += 1
            bad.append("%s (exit %s, no summary%s)" % (n, rc, ": timed out" if rc == "124" else ""))
        k = sum("no CUDA device" in l for l in lines_of(out))
        if k:
            nodev.append("%s (%d)" % (n, k))
        reasons += ["%s: %s" % (n, l[11:]) for l in lines_of(out) if l.startswith("  skipped: ")]
    s.fig("programs", len(progs))
    s.fig("passed", total[0]); s.fig("failed", total[1]); s.fig("skipped", total[2])
    count = Counter(r for r in reasons if r)
    s.fig("skip_reasons", semi("%s (x%d)" % (r, count[r]) for r in sorted(count)))
    if bad:
        s.fig("failing", "; ".join(bad))
        return "fail", "; ".join(bad)
    if not run.simulated and nodev:
        return "fail", "GPU tests skipped for lack of a device: " + ", ".join(nodev)
    return "ok", "%d passed, %d failed, %d skipped in %d programs" % (total[0], total[1], total[2], len(progs))


def j_sanitizer(s, run):
    tests, tools = s.facts.get("tests", "").split(), s.facts.get("tools", "").split()
    s.fig("tests", " ".join(tests)); s.fig("tools", " ".join(tools))
    if s.status:
        return
    if s.facts.get("cases"):
        s.fig("cases", s.facts["cases"])
    bad, total, unfinished = [], 0, []
    for tool in tools:
        res = []
        for t in tests:
            log = "cs-%s-%s.log" % (tool, t)
            rc, out = s.rcs.get(log, "not run"), s.text(log)
            errs, warns, summary = "", "", ""
            for l in lines_of(out):
                # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)",
                # the others with "ERROR SUMMARY: E errors".
                m = re.match(r".*ERROR SUMMARY: ([0-9]*) error", l) or \
                    re.match(r".*RACECHECK SUMMARY: .*\(([0-9]*) error", l)
                errs = m.group(1) if m else errs
                m = re.match(r".*RACECHECK SUMMARY: .*, ([0-9]*) warning", l)
                warns = m.group(1) if m else warns
                summary = l if re.match(r"^[0-9]+ passed, ", l) else summary
            if not errs and rc in ("124", "137", "not run"):
                # Out of time is no finding: said apart from the errors.
                unfinished.append("%s %s" % (tool, t))
                res.append(t + " not finished")
                continue
            if not errs:
                bad.append("%s %s: no summary line (exit %s)" % (tool, t, rc))
                res.append(t + " ?")
                continue
            total += int(errs)
            if errs != "0":
                bad.append("%s %s: %s errors" % (tool, t, errs))
            if " 0 failed, " not in summary:
                bad.append("%s %s: the test failed under the sanitizer (%s)" % (tool, t, summary or "no summary"))
            res.append("%s %s%s" % (t, errs, " (%s warnings)" % warns if warns else ""))
        s.fig(tool, ", ".join(res))
    runs = len(tests) * len(tools)
    s.fig("errors", total)
    s.fig("finished", "%d of %d runs" % (runs - len(unfinished), runs))
    late = "; not finished (time limit) %d of %d runs: %s" % (len(unfinished), runs, ", ".join(unfinished)) \
        if unfinished else ""
    if bad:
        return "fail", "; ".join(bad) + late
    return "ok", "0 errors in %d of %d runs%s" % (runs - len(unfinished), runs, late)


# NVIDIA's published peaks (datasheets at nvidia.com/en-us/data-center/h100/ and
# /h200/): memory bandwidth in GB/s, FP16/BF16 tensor-core TFLOP/s dense (the
# sheets print twice that "with sparsity"), FP32 (CUDA cores) TFLOP/s. Matched
# on nvidia-smi's name, first match wins (an "NVIDIA H100 80GB HBM3" is the SXM).
PEAKS = [(r"H200 NVL", "H200 NVL", 4800, 835.5, 60), (r"H200", "H200 SXM", 4800, 989.5, 67),
         (r"H100 NVL", "H100 NVL", 3900, 835.5, 60), (r"H100 PCIe", "H100 PCIe", 2000, 756.5, 51),
         (r"H100", "H100 SXM", 3350, 989.5, 67)]


def j_kernels(s, run):
    # "  time KERNEL [DESC] on DEV: T us, B GB/s[, F GFLOP/s]" (tests/test_backend_ops.c, time_case)
    out, rc, cases = s.text("kernels.log"), s.rcs.get("kernels.log", ""), []
    for l in lines_of(out):
        m = re.match(r"^\s*time (\S+) \[(.*)\] on (\S+): ([0-9.]+) us, ([0-9.]+) GB/s(?:, ([0-9.]+) GFLOP/s)?$", l)
        if m:
            cases.append((m.group(1), m.group(2), float(m.group(4)), float(m.group(5)),
                          float(m.group(6)) if m.group(6) else 0.0))
    summary = ([l for l in lines_of(out) if re.match(r"^[0-9]+ passed, ", l)] or [""])[-1]
    if s.status:
        return
    name = s.facts.get("gpu", "")
    peak = next((p for p in PEAKS if re.search(p[0], name)), None) if not run.simulated else None
    us = sorted(c[2] for c in cases)
    s.fig("timed", "%d cases on cuda:0, %s runs each, median %s us%s" % (
        len(cases), s.facts.get("runs", "?"), "%.1f" % us[len(us) // 2] if us else "?",
        " (simulated: the times mean nothing)" if run.simulated else ""))
    if peak:
        s.fig("peak", "%s: %d GB/s memory, %.1f TFLOP/s FP16/BF16 tensor (dense), %d TFLOP/s FP32"
              % (peak[1], peak[2], peak[3], peak[4]))
    elif not run.simulated:
        s.fig("peak", "no published peak on file for %r" % (name or "this GPU"))

    def pct(v, p):
        return " (%.1f %% of peak)" % (100.0 * v / p) if p else ""
    for i, c in enumerate(sorted(cases, key=lambda c: -c[2])[:5]):
        s.fig("slowest_%d" % (i + 1), "%s [%s]: %.1f us, %.2f GB/s%s" % (
            c[0], c[1], c[2], c[3], ", %.2f GFLOP/s" % c[4] if c[4] else ""))
    for dt, k in (("f16", 3), ("bf16", 3), ("f32", 4)):
        g = [c for c in cases if c[0] == "gemm" and c[1].split(" ")[0] == dt]
        if g:
            b = max(g, key=lambda c: c[4])
            s.fig("gemm_" + dt, "%.3f TFLOP/s%s [%s]" % (b[4] / 1e3, pct(b[4] / 1e3, peak[k] if peak else 0), b[1]))
    best = {}
    for c in cases:
        if c[0] != "gemm" and c[3] > best.get(c[0], (0, 0, ""))[0]:
            best[c[0]] = (c[3], c[2], c[1])
    for k, b in sorted(best.items(), key=lambda kv: -kv[1][0]):
        s.fig("gbps_" + k, "%.2f GB/s%s [%s]" % (b[0], pct(b[0], peak[2] if peak else 0), b[2]))
    if cases:
        s.fig("note", "GB/s counts each buffer once (a lower bound on the traffic); small cases measure launch cost")
    if summary and " 0 failed, " not in summary:
        return "fail", "test_backend_ops: " + summary
    if not cases:
        return "fail", "no timed case (exit %s%s): %s" % (rc, ", timed out" if rc == "124" else "", last_line(out))
    if rc in ("124", "137"):
        return "ok", "not finished (time limit): %d cases timed" % len(cases)
    if rc != "0":
        return "fail", "test_backend_ops exited with %s: %s" % (rc, last_line(out))
    return "ok", "%d cases timed%s" % (len(cases), "; gemm " + ", ".join(
        "%s %s" % (f[0][5:], f[1].split(" [")[0]) for f in s.figs if f[0].startswith("gemm_")) if cases else "")


def j_h2d(s, run):
    out, rc = s.text("h2d.log"), s.rcs.get("h2d.log", "")
    if rc != "0":
        return "fail", "ferry bench h2d exited with %s: %s" % (rc, last_line(out))
    rows = [obj(l) for l in lines_of(out) if '"direction":' in l]
    s.fig("rows", len(rows))
    if re.search(r'"gpu": *false', out):
        return "fail", "no CUDA device: ferry bench h2d measured host memcpy only"
    if run.simulated:
        return "skipped", "simulated (bandwidth needs real hardware; the command ran and gave %d rows)" % len(rows)

    def gbps(direction, memory, mode, size):
        for r in rows:
            if (r.get("direction"), r.get("memory"), r.get("mode"), r.get("bytes")) == (direction, memory, mode, size):
                return r.get("gb_per_s", "")
        return ""
    mib64 = "67108864"
    pin, page_a = gbps("H2D", "pinned", "async", mib64), gbps("H2D", "pageable", "async", mib64)
    page_s, d2h = gbps("H2D", "pageable", "sync", mib64), gbps("D2H", "pinned", "async", mib64)
    asyncs = [r["gb_per_s"] for r in rows if r.get("direction") == "H2D" and r.get("mode") == "async"
              and "gb_per_s" in r]
    best = max(asyncs, key=float) if asyncs else ""
    s.fig("h2d_pinned_async_64MiB_GBps", pin or "?")
    s.fig("h2d_pageable_async_64MiB_GBps", page_a or "?")
    s.fig("h2d_pageable_sync_64MiB_GBps", page_s or "?")
    s.fig("d2h_pinned_async_64MiB_GBps", d2h or "?")
    s.fig("h2d_best_async_GBps", best or "?")
    s.fig("h2d_pinned_256MiB_GBps", gbps("H2D", "pinned", "async", "268435456"))
    if not pin or not best:
        return "fail", "no pinned async H2D row at 64 MiB"
    frac = calc("%.3f", lambda: float(pin) / float(best))
    s.fig("pinned_vs_best", frac)
    why = []
    if num(pin) < 50:
        why.append("pinned H2D at 64 MiB is %s GB/s (< 50)" % pin)
    if num(frac) < 0.9:
        why.append("pinned H2D at 64 MiB is %s of the best async copy (< 0.90)" % frac)
    if why:
        return "fail", "; ".join(why)
    return "ok", "pinned %s GB/s at 64 MiB (%s of the best async copy), pageable %s GB/s" % (pin, frac, page_a)


def bench_figs(s, log):
    """The rows of `ferry bench --format json` as figures; the last row's (images/s, ratio)."""
    objs = [obj(l) for l in lines_of(s.text(log)) if l.startswith("{") or '"workers":' in l]
    base = next((o["images_per_s"] for o in objs if "baseline" in o and "images_per_s" in o), "")
    if base:
        s.fig("plain_libpng_1_thread_ips", base)
    ips = ratio = ""
    for o in objs:
        if "workers" not in o:
            continue
        w, ips = o["workers"], o.get("images_per_s", "")
        ratio = calc("%.2f", lambda: float(ips) / (int(w) * float(base))) if base and num(w) > 0 else ""
        s.fig("workers_" + w + ("_overlap_off" if o.get("overlap") is False else ""),
              "%s images/s, stall %s %%, H2D %s GB/s%s%s" % (
                  ips, o.get("stall_pct", ""), o.get("h2d_gbps", ""),
                  ", %s x (%s x plain libpng)" % (ratio, w) if ratio else "",
                  " (simulated)" if o.get("simulated") is True else ""))
    s.fig("digest", " ".join(sorted({o["digest"] for o in objs if isinstance(o.get("digest"), str)})))
    return ips, ratio


def bench_failed(s, log):
    rc = s.rcs.get(log, "")
    if rc != "0":
        return "fail", "ferry bench exited with %s: %s" % (
            rc, ([l for l in lines_of(s.text(log)) if not l.startswith("{")] or [""])[-1])
    if s.run.simulated:
        return "ok", "ran on the simulated GPU (figures mean nothing)"


def j_pipeline(s, run):
    if s.status:
        return
    ips, ratio = bench_figs(s, "pipeline.log")
    failed = bench_failed(s, "pipeline.log")
    if failed:
        return failed
    n, goal = run.nproc, "met" if num(ratio or 0) >= 0.9 else "not met"
    s.fig("goal", "with %s workers >= 0.9 x %s x the plain libpng rate: %s" % (n, n, goal))
    return "ok", "%s images/s with %s workers, %s x %s x the plain libpng rate (goal 0.9: %s)" % (
        ips, n, ratio, n, goal)


def j_color(s, run):
    if s.status:
        return
    lanes, per = int(s.facts["lanes"]), int(s.facts["per"])
    s.fig("images", "%d of 256x256x3 (%d class folders of the same %d)" % (lanes * per, lanes, per))
    s.fig("transforms", "decoded 256x256, center-cropped to 224x224, then a seeded random crop (pad 16) "
          "and left-right flip per sample (--size 224 --crop-pad 16 --flip)")
    ips, ratio = bench_figs(s, "color.log")
    return bench_failed(s, "color.log") or (
        "ok", "%s images/s with %s workers, %s x %s x the plain libpng rate" % (ips, run.nproc, ratio, run.nproc))


def j_overlap(s, run):
    if s.status:
        return
    res = []
    for log, rc, _, _ in s.cmds:
        x = log[len("overlap-"):-len(".log")]
        if rc != "0":
            res.append("compute %s ms: exit %s" % (x, rc))
            continue
        objs = [obj(l) for l in lines_of(s.text(log))]
        on = next((o for o in objs if o.get("overlap") is True), {})
        off = next((o for o in objs if o.get("overlap") is False), {})
        s.fig("compute_%sms" % x, "overlap on %s images/s (stall %s %%), off %s images/s (stall %s %%)%s" % (
            on.get("images_per_s", ""), on.get("stall_pct", ""), off.get("images_per_s", ""),
            off.get("stall_pct", ""), " (simulated)" if run.simulated else ""))
    if res:
        return "fail", "; ".join(res)
    if run.simulated:
        return "ok", "ran on the simulated GPU (figures mean nothing)"


def j_torch(s, run):
    if "torch" in s.facts:
        s.fig("torch", s.facts["torch"])
    if s.status:
        return
    bad = []
    for what in ("loader", "mlp", "cnn"):
        log = "torch-%s.log" % what
        rc, line = s.rcs.get(log, ""), ([l for l in lines_of(s.text(log)) if l.startswith("{")] or [""])[-1]
        if rc != "0" or not line:
            bad.append("%s: exit %s" % (what, rc))
            continue
        o = obj(line)
        torch, ferry = o.get("torch") or {}, o.get("ferry") if what == "loader" else o.get("ferry_images_per_s")
        if isinstance(ferry, dict):
            ferry = ferry.get("images_per_s")
        s.fig(what, "ferry %s images/s, PyTorch %s images/s, ratio %s%s" % (
            calc("%.0f", lambda: float(ferry)), calc("%.0f", lambda: float(torch.get("images_per_s"))),
            calc("%.2f", lambda: float(o.get("ratio"))), "" if what == "loader" else
            " (one training epoch on %s images each)" % o["limit"] if o.get("limit") else " (one training epoch)"))
    if bad:
        return "fail", "; ".join(bad)


def j_step(s, run):
    """bench_step (ferry eager and --graph) and step_torch.py (eager, compile): ms per step."""
    if s.status:
        return
    ms, bad = {}, []
    for log, rc in s.rcs.items():
        m = re.fullmatch(r"step-(ferry|torch)-(eager|graph|compile)-([0-9]+)\.log", log)
        if not m:
            continue
        line = ([l for l in lines_of(s.text(log)) if l.startswith("{")] or [""])[-1]
        if rc != "0" or not line:
            # PyTorch's side is a comparison: its failure (torch.compile where
            # it does not work) is reported, ferry's fails the step.
            (bad if m.group(1) == "ferry" else []).append("%s: exit %s" % (log, rc))
            s.fig("%s_%s_b%s" % m.groups(), "exit %s: %s" % (rc, last_line(s.text(log))))
            continue
        ms[m.groups()] = num(obj(line).get("ms_per_step"))
        s.fig("%s_%s_b%s_ms" % m.groups(), "%.4f" % ms[m.groups()])
    for b in sorted({k[2] for k in ms}, key=int):
        e, g = ms.get(("ferry", "eager", b)), ms.get(("ferry", "graph", b))
        te, tc = ms.get(("torch", "eager", b)), ms.get(("torch", "compile", b))
        if e and g:
            s.fig("graph_speedup_b%s" % b, "%.2f" % (e / g))
        if g and te:
            s.fig("graph_vs_torch_eager_b%s" % b, "%.2f (goal >= 1)" % (te / g))
        if g and tc:
            s.fig("graph_vs_torch_compile_b%s" % b, "%.2f" % (tc / g))
    if "torch_step" in s.facts:
        s.fig("torch", s.facts["torch_step"])
    if bad:
        return "fail", "; ".join(bad)
    if run.simulated:
        return "ok", "ran on the simulated GPU (times not meaningful)"
    return "ok", ""


def j_train(s, run):
    if s.status:
        return
    log = s.name + ".log"
    out, rc = s.text(log), s.rcs.get(log, "")
    acc, ntrain = first(r"^test accuracy: (.*)", out), first(r"^data: ([0-9]*) train", out)
    # Epoch lines: epoch, train loss, train acc, val loss, val acc, stall, images/s.
    eps = [l.split()[6] for l in lines_of(out) if len(l.split()) == 7 and re.fullmatch(r"[0-9]+", l.split()[0])]
    s.fig("device", first(r"^device: (.*)", out))
    s.fig("epochs_done", len(eps))
    if eps and ntrain:
        secs = [calc("%.2f", lambda: int(ntrain) / num(e)) for e in eps]
        s.fig("epoch_seconds", " ".join(secs))
        s.fig("train_images_per_s", " ".join(eps))
        s.fig("mean_epoch_s_after_first", calc("%.2f", lambda: sum(
            int(ntrain) / num(e) for e in eps[1:]) / (len(eps) - 1)) if len(eps) > 1 else "-")
    s.fig("test_accuracy", acc or "none")
    if rc != "0":
        return "fail", "train_gray exited with %s%s: %s" % (rc, " (timed out)" if rc == "124" else "", last_line(out))
    if not acc:
        return "fail", "no test accuracy line"
    if run.simulated:
        return "ok", "ran on the simulated GPU, tiny data (accuracy %s not checked)" % acc
    if num(acc) >= 0.915:
        return "ok", "test accuracy %s (goal 0.915)" % acc
    return "fail", "test accuracy %s < 0.915" % acc


def j_nccl(s, run):
    if s.status:
        return
    out, rc, bad = s.text("nccl-test.log"), s.rcs.get("nccl-test.log", ""), []
    summary = ([l for l in lines_of(out) if re.match(r"^[0-9]+ passed, ", l)] or [""])[-1]
    s.fig("test_dist", summary or "no summary (exit %s)" % rc)
    if re.search(r"skipped:.*(NCCL|NVIDIA)", out):
        bad.append("the NCCL test skipped: " + first(r"^.*skipped:.*$", out, 0).lstrip(" "))
    if " 0 failed, " not in summary:
        bad.append("test_dist: " + (summary or "exit " + rc))
    elif rc != "0":
        bad.append("test_dist exited with " + rc)
    if "nccl-overhead.log" in s.rcs:
        out = s.text("nccl-overhead.log")
        if s.rcs["nccl-overhead.log"] == "0":
            s.fig("dist_overhead", semi(l for l in lines_of(out) if re.match(r"^(without|with|overhead)", l)))
            if s.facts.get("overhead_runs") == "1":
                s.fig("dist_overhead_runs", "1 run (no time left for 3): a single run swings by several points")
            s.fig("backend", first(r"^distributed:.*$", out, 0))
        else:
            bad.append("dist_overhead.sh exited with " + s.rcs["nccl-overhead.log"])
    if bad:
        return "fail", "; ".join(bad)


def j_safetensors(s, run):
    if s.status:
        return
    out, rc = s.text("safetensors.log"), s.rcs.get("safetensors.log", "")
    line = ([l for l in lines_of(out) if l.startswith("{")] or [""])[-1]
    o = obj(line)
    for k in ("model", "reader", "torch_device", "max_abs_diff", "rel_diff", "argmax_agree", "batch"):
        if isinstance(o.get(k), str) and o[k]:
            s.fig(k, o[k])
    verdict = o.get("verdict") if isinstance(o.get("verdict"), str) else ""
    if rc == "0" and line:
        return "ok", verdict
    return "fail", verdict or "exit %s: %s" % (rc, last_line(out))


JUDGES = {"info": j_info, "gpu": j_gpu, "tests": j_tests, "sanitizer": j_sanitizer, "kernels": j_kernels,
          "h2d": j_h2d,
          "pipeline": j_pipeline, "color": j_color, "overlap": j_overlap, "torch": j_torch, "step": j_step,
          "train": j_train, "train-amp": j_train, "nccl": j_nccl, "safetensors": j_safetensors}


class Run:
    def __init__(self, work):
        d = dict(read_kv(os.path.join(work, "run")))
        self.d, self.simulated, self.nproc = d, bool(d.get("simulated")), d.get("nproc", "1")
        self.cpu = "%s, %s cores" % (first(r"^model name\s*: (.*)", read("/proc/cpuinfo")), self.nproc)
        self.memory = calc("%.0f GiB", lambda: int(first(r"^MemTotal:\s*([0-9]+)", read("/proc/meminfo"))) / 1048576)
        self.gpu_cuda = first(r".*CUDA Version: *([0-9.]*)", read(os.path.join(work, "nvidia-smi.log")))


def load(work):
    run = Run(work)
    steps = []
    d = os.path.join(work, "steps")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        s = Step(os.path.join(d, f))
        s.run = run
        s.judge(run)
        steps.append(s)
    return run, steps


def jstr(v):
    v = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "", str(v).replace("\r", ""))
    return json.dumps(v, ensure_ascii=False)


def jval(v):  # a number stays a number
    return v if re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?", v) else jstr(v)


def report(work, outdir):
    run, steps = load(work)
    d = run.d
    total = "%.1f" % (time.time() - float(d.get("t_start", time.time())))
    count = Counter(s.status if s.status in ("ok", "fail") else "skipped" for s in steps)
    by = {s.name: s for s in steps}
    info = by.get("info")
    out = read(os.path.join(work, "info.log")) if info and info.started else ""
    version, build, dist = (first(p, out) or "?" for p in (r"^ferry (.*)", r"^build: (.*)", r"^distributed: (.*)"))
    cuda0 = first(r"^ +(cuda:[0-9].*)", out)
    ferry_device = re.sub(r", compute capability.*", "", re.sub(r"^cuda:0 *", "", cuda0))
    gpu = by.get("gpu")
    facts = gpu.facts if gpu and gpu.started else {}
    if run.simulated:
        mode = "simulated GPU (FERRY_SIM_GPUS=%s)%s" % (d.get("sim_gpus", ""),
                                                       ", dry run (short limits)" if d.get("dry") else "")
        device = (ferry_device or "none") + " (simulated)"
    else:
        mode, device = "real GPU", facts.get("name") or ferry_device or "unknown"
    driver = facts.get("driver_version", "") + (" (CUDA %s)" % run.gpu_cuda if run.gpu_cuda else "")
    driver = driver or ("none (simulated)" if run.simulated else "unknown")
    host, date = socket.gethostname() or "unknown", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    missing = "; still missing: " + d["libs_missing"] if d.get("libs_missing") else ""
    head = [("date", date), ("mode", "simulated" if run.simulated else "real"), ("dry_run", None),
            ("device", device), ("driver", driver), ("host", "%s; %s" % (host, run.cpu)),
            ("ferry", "%s; %s; %s" % (version, build, dist)), ("bundle", d.get("bundle", "")),
            ("libraries", (d.get("libs") or "system") + missing), ("command", d.get("command", ""))]
    js = ["{"] + ['  "%s": %s,' % (k, "true" if d.get("dry") else "false") if v is None else
                  '  "%s": %s,' % (k, jstr(v)) for k, v in head]
    js += ['  "seconds": %s,' % total,
           '  "summary": {"ok": %d, "fail": %d, "skipped": %d},' % (count["ok"], count["fail"], count["skipped"]),
           '  "steps": [']
    for i, s in enumerate(steps):
        js.append('    {"name": %s, "status": %s, "reason": %s, "seconds": %s, "title": %s, "figures": {%s}, '
                  '"commands": [%s]}%s' % (
                      jstr(s.name), jstr(s.status), jstr(s.reason), s.seconds, jstr(s.title),
                      ", ".join("%s: %s" % (jstr(k), jval(v)) for k, v in s.figs),
                      ", ".join(jstr(c[3]) for c in s.cmds if c[3]), "," if i < len(steps) - 1 else ""))
    js += ["  ]", "}"]
    md = ["# ferry gpu-check", "", "- Date: " + date, "- Device: %s; driver: %s" % (device, driver),
          "- Mode: " + mode, "- Host: %s, %s" % (host, run.cpu),
          "- ferry: %s; build: %s; distributed: %s" % (version, build, dist),
          "- Bundle: " + d.get("bundle", ""),
          "- Libraries: " + (d.get("libs") or "all found on the system") + missing,
          "- Command: `%s`" % d.get("command", ""),
          "- Result: %d ok, %d failed, %d skipped in %s s (each command's output: logs.txt)" % (
              count["ok"], count["fail"], count["skipped"], total),
          "", "| step | status | s | key figures |", "|---|---|---|---|"]
    for s in steps:
        key = s.reason or semi("%s: %s" % kv for kv in s.figs[:3])
        md.append("| %s | %s | %s | %s |" % (s.name, s.status, s.seconds, key.replace("|", "\\|")))
    for s in steps:
        md += ["", "## %s: %s" % (s.name, s.status), "",
               "%s. %s s.%s" % (s.title, s.seconds, " %s: %s" % (s.status.capitalize(), s.reason) if s.reason else "")]
        if s.figs:
            md += [""] + ["- %s: %s" % kv for kv in s.figs]
        cmds = [c[3] for c in s.cmds]
        if cmds:
            md += ["", "```sh"] + cmds + ["```"]
    for name, text in (("report.json", js), ("report.md", md)):
        with open(os.path.join(outdir, name), "w", encoding="utf-8") as f:
            f.write("\n".join(text) + "\n")
    print("gpu-check: %d ok, %d failed, %d skipped in %s s: %s/report.md, %s/report.json, %s/logs.txt" % (
        count["ok"], count["fail"], count["skipped"], total, outdir, outdir, outdir), file=sys.stderr)
    return 1 if count["fail"] else 0


def main(argv):
    if len(argv) == 2 and argv[0] == "line":
        s = Step(argv[1])
        s.run = Run(s.dir)
        s.judge(s.run)
        print("   %s%s%s" % (s.status, ": " + s.reason if s.reason else "",
                             " (%s s)" % s.seconds if s.started else ""), file=sys.stderr)
        return 0
    if len(argv) == 3 and argv[0] == "report":
        return report(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "steps":
        with open(argv[1], encoding="utf-8") as f:
            r = json.load(f)
        print(r.get("mode"), "dry-run" if r.get("dry_run") else "full")
        for s in r.get("steps", []):
            print("\t".join(str(s.get(k, "")).replace("\t", " ").replace("\n", " ")
                            for k in ("status", "name", "seconds", "reason")))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
