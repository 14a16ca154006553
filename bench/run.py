#!/usr/bin/env python3
"""Runs every keplershm benchmark in one go and writes the results side by side.

    /usr/bin/python3 bench/run.py [--build build] [--out bench/results] [--smoke]

Outputs, in --out: results.json (machine-readable, for comparing later runs), results.md (the tables that
bench/README.md quotes) and scaling.png (cost per frame against process count, log-log). Ratios are always
against a baseline measured in the same run. --smoke runs a tiny configuration (CI checks the driver
works; its numbers mean nothing).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time


def run(cmd, timeout):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s" % (cmd[0], done.returncode, done.stderr[-2000:]))
    return done.stdout


def machine():
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "cpus": os.cpu_count(), "kernel": platform.release(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def protocol(bin_dir, smoke):
    """Google Benchmark pairs: each protocol cost against its floor in the same process and run."""
    min_time = "0.01" if smoke else "0.5"
    out = run([os.path.join(bin_dir, "keplershm-bench-protocol"), "--benchmark_format=json",
               "--benchmark_min_time=" + min_time], 600)
    times = {b["name"]: b["real_time"] for b in json.loads(out)["benchmarks"]}  # ns
    rows = []
    for n in (100, 1000, 10000):
        def t(name):
            return times.get("%s/%d" % (name, n))
        rows.append({
            "processes": n,
            "publish_ns": t("BM_Publish"), "memcpy_ns": t("BM_PublishBaselineMemcpy"),
            "publish_ratio": t("BM_Publish") / t("BM_PublishBaselineMemcpy"),
            "acquire_validate_ns": t("BM_AcquireValidate"),
            "copy_out_ns": t("BM_CopyOut"), "copy_memcpy_ns": t("BM_CopyOutBaselineMemcpy"),
            "copy_bandwidth_fraction": t("BM_CopyOutBaselineMemcpy") / t("BM_CopyOut"),
            "read_in_place_ns": t("BM_ReadInPlace"), "read_plain_ns": t("BM_ReadBaselinePlain"),
            "read_ratio": t("BM_ReadInPlace") / t("BM_ReadBaselinePlain"),
        })
    return rows


def wake(bin_dir, smoke):
    return json.loads(run([os.path.join(bin_dir, "keplershm-bench-wake"), "200" if smoke else "5000"], 300))


def transport(bin_dir, smoke):
    path = "/tmp/keplershm-transport-%d.json" % os.getpid()
    args = ["--sizes", "10,100", "--iterations", "3", "--budget", "0.1"] if smoke else \
           ["--sizes", "100,1000,10000", "--iterations", "200", "--budget", "3"]
    print(run([os.path.join(bin_dir, "keplershm-bench-transport"), "--json", path] + args, 1800), file=sys.stderr)
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    os.unlink(path)
    return rows


def estimator(bin_dir, smoke):
    binary = os.path.join(bin_dir, "estimate_bench")
    if not os.path.exists(binary):
        return {"skipped": "estimate_bench not built"}
    filt = "BM_Attribute/1000|BM_CurveModel" if smoke else "BM_Attribute|BM_EstimateFrame|BM_XgboostModel|BM_CurveModel|BM_Scrape"
    out = run([binary, "--benchmark_format=json", "--benchmark_filter=" + filt,
               "--benchmark_min_time=" + ("0.01" if smoke else "0.3")], 1200)
    return [{"name": b["name"], "real_time": b["real_time"], "unit": b["time_unit"],
             "counters": {k: v for k, v in b.items() if k not in (
                 "name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
                 "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index")}}
            for b in json.loads(out)["benchmarks"]]


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(results):
    m = results["machine"]
    out = ["Machine: %s, %d CPUs, kernel %s, %s." % (m["cpu"], m["cpus"], m["kernel"], m["date"]), ""]
    out.append("### Protocol (in-process, Google Benchmark)\n")
    out.append(table(
        ["processes", "publish µs", "memcpy µs", "publish ÷ memcpy (goal ≤1.5)", "acquire+validate ns (goal ≤100)",
         "copy-out µs", "copy-out bandwidth ÷ memcpy (goal ≥0.9)", "read in place ÷ plain read (goal ≤1.2)"],
        [[r["processes"], "%.2f" % (r["publish_ns"] / 1e3), "%.2f" % (r["memcpy_ns"] / 1e3), "%.2f" % r["publish_ratio"],
          "%.0f" % r["acquire_validate_ns"], "%.2f" % (r["copy_out_ns"] / 1e3), "%.2f" % r["copy_bandwidth_fraction"],
          "%.2f" % r["read_ratio"]] for r in results["protocol"]]))
    w = results["wake"]
    out.append("\nCross-process wake-up, publish → reader running (futex), %d samples: p50 %.1f µs (goal ≤20), "
               "p99 %.1f µs, max %.1f µs.\n" % (w["samples"], w["p50_us"], w["p99_us"], w["max_us"]))
    out.append("### Transport of the same content between two processes (medians)\n")
    out.append(table(
        ["method", "processes", "writer µs", "reader µs", "end to end µs", "CPU % at 1 Hz", "× floor", "× shm in place"],
        [[r["method"], r["processes"], "%.1f" % r["writer_us"], "%.1f" % r["reader_us"], "%.1f" % r["end_to_end_us"],
          "%.4f" % r["cpu_percent_at_1hz"], "%.2f" % r["ratio_to_floor"], "%.1f" % r["ratio_to_shm_in_place"]]
         for r in results["transport"]]))
    if isinstance(results.get("estimator"), list):
        out.append("\n### Estimator (Google Benchmark)\n")
        out.append(table(["benchmark", "time", "counters"],
                         [[b["name"], "%.2f %s" % (b["real_time"], b["unit"]),
                           ", ".join("%s=%g" % (k, v) for k, v in b["counters"].items() if isinstance(v, (int, float)))]
                          for b in results["estimator"]]))
    return "\n".join(out) + "\n"


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    methods = []
    for r in results["transport"]:
        if r["method"] not in methods:
            methods.append(r["method"])
    for method in methods:
        rows = sorted((r for r in results["transport"] if r["method"] == method), key=lambda r: r["processes"])
        ax.plot([r["processes"] for r in rows], [r["end_to_end_us"] for r in rows], marker="o", label=method)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("processes per frame")
    ax.set_ylabel("end to end per frame (µs, median)")
    ax.set_title("Moving one interval from writer to reader")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build", help="CMake build directory (binaries in BUILD/bin)")
    parser.add_argument("--out", default="bench/results", help="where results.json/.md and scaling.png go")
    parser.add_argument("--smoke", action="store_true", help="tiny configuration, for CI")
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    results = {"machine": machine(), "smoke": args.smoke}
    results["protocol"] = protocol(bin_dir, args.smoke)
    results["wake"] = wake(bin_dir, args.smoke)
    results["transport"] = transport(bin_dir, args.smoke)
    results["estimator"] = estimator(bin_dir, args.smoke)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(markdown(results))
    plot(results, os.path.join(args.out, "scaling.png"))
    print(markdown(results))


if __name__ == "__main__":
    main()
