# bench/lib.sh -- what the benchmark scripts share: the tools, timing, medians and the JSON results file.
# Sourced by bench/*.sh, which set `name` first. Results are JSON lines collected with
# bench_record and written, with the date and the machine, by bench_write_json.

# Debian's python3 (numpy + onnx) makes the models; the first python3 on PATH is the one
# pip installs torch and onnxconverter-common into.
DEBIAN_PY=${DEBIAN_PY:-/usr/bin/python3}
PY=${PY:-python3}
# Both mpc (OpenBLAS) and PyTorch run on this many threads. One by default: the 2-core
# machine is shared, and with 2 threads under load PyTorch's step time is its threads waking
# (mlp_seed: ~120 ms a step at 2 threads against 0.7 ms at 1, measured 2026-12-02).
BENCH_THREADS=${BENCH_THREADS:-1}
export OPENBLAS_NUM_THREADS=$BENCH_THREADS OMP_NUM_THREADS=$BENCH_THREADS

# The machine is shared: the load when the benchmark starts goes into the results.
bench_load_start=$(cut -d' ' -f1-3 /proc/loadavg)

bench_tmp=$(mktemp -d)
trap 'rm -rf "$bench_tmp"' EXIT
bench_records=$bench_tmp/records.jsonl
: >"$bench_records"

# Milliseconds that the command takes, wall clock (its output is discarded).
time_ms() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  awk -v a="$start" -v b="$end" 'BEGIN{printf "%.3f", (b-a)/1e6}'
}

# The median of the numbers given as arguments.
median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{if(NR%2) printf "%.3f", v[(NR+1)/2]; else printf "%.3f", (v[NR/2]+v[NR/2+1])/2}'
}

# awk function: x to 4 significant digits below 100 (a small model's CPU step takes about
# 0.01 ms), to 0.1 above (no exponent however large).
bench_awk_fmt='function fmt(x) { return x < 100 ? sprintf("%.4g", x) : sprintf("%.1f", x) }'

# The median of the ms column (5th) of an mpc-run --log CSV, after the first WARMUP steps.
median_log_ms() {
  tail -n +$((2 + $2)) "$1" | cut -d, -f5 | sort -g |
    awk "$bench_awk_fmt"'{v[NR]=$1} END{printf "%s", fmt(NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'
}

# "median min max" of the numbers given as arguments, as fmt writes them ("n/a n/a n/a"
# when any is "n/a"): the middle of several rounds of a measurement and their spread.
median_min_max() {
  case " $* " in *" n/a "*) echo "n/a n/a n/a"; return ;; esac
  printf '%s\n' "$@" | sort -g | awk "$bench_awk_fmt"'{v[NR]=$1} END{m = NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
    printf "%s %s %s", fmt(m), fmt(v[1]), fmt(v[NR])}'
}

# "median min max" of the paired ratios A[i] / B[i] of two space-separated lists of numbers
# measured in the same rounds: a ratio within one round has both sides under the same load.
paired_ratios() {
  local -a a b r=()
  local i
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  for i in "${!a[@]}"; do r+=("$(ratio "${a[i]}" "${b[i]:-n/a}")"); done
  median_min_max "${r[@]}"
}

# The numbers given as arguments as a JSON list, for bench_record ("null" when any is "n/a").
json_list() {
  case " $* " in *" n/a "*) echo null; return ;; esac
  local IFS=,
  echo "[$*]"
}

# a / b to 3 digits ("n/a" when either is missing or b is 0).
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN{if(a==""||b==""||a=="n/a"||b=="n/a"||b+0==0) print "n/a"; else printf "%.3f", a/b}'
}

# "PASS" when the awk condition over a and b holds, else "FAIL" ("n/a" without numbers).
verdict() {
  awk -v a="$1" -v b="$2" "BEGIN{if(a==\"\"||b==\"\"||a==\"n/a\"||b==\"n/a\") print \"n/a\"; else if($3) print \"PASS\"; else print \"FAIL\"}"
}

# Appends one JSON object to the results; arguments are key=value, values that look like
# numbers are written as numbers, true/false/null and [lists] as themselves (JSON), anything
# else as a string.
bench_record() {
  "$DEBIAN_PY" - "$@" >>"$bench_records" <<'EOF'
import json, sys
rec = {}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    if v in ("true", "false", "null") or v.startswith("["):
        rec[k] = json.loads(v)
    else:
        try:
            rec[k] = int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            rec[k] = v
print(json.dumps(rec))
EOF
}

# Writes {"benchmark", "date", "machine": {...}, "results": [...]} to the file $1.
bench_write_json() {
  mkdir -p "$(dirname "$1")"
  "$DEBIAN_PY" - "$name" "$1" "$bench_records" "$BENCH_THREADS" "$bench_load_start" <<'EOF'
import datetime, json, os, subprocess, sys
name, out, records, threads, load_start = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
def git(*args):  # "" where there is no git or no repository (the GPU machine's copy)
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
# Binaries built elsewhere (tools/gpu-check.sh --prebuilt) name the commit they were built
# from: the GPU machine's copy of the repository may hold an older HEAD.
commit = os.environ.get("MPC_BUILD_COMMIT") or git("rev-parse", "--short", "HEAD")
dirty = (os.environ["MPC_BUILD_DIRTY"] == "1" if os.environ.get("MPC_BUILD_COMMIT")
         else bool(git("status", "--porcelain", "--untracked-files=no")))
doc = {"benchmark": name, "date": datetime.date.today().isoformat(),
       "machine": {"nproc": os.cpu_count(), "cpu": cpu, "threads": int(threads),
                   "loadavg_start": load_start, "loadavg_end": " ".join(open("/proc/loadavg").read().split()[:3])},
       "commit": commit, "working_tree_dirty": dirty,
       "results": [json.loads(l) for l in open(records) if l.strip()]}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
print(f"results: {out}")
EOF
}

# One line about the machine, for the tables.
bench_machine_line() {
  echo "$(date +%F), $(grep -c ^processor /proc/cpuinfo) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $BENCH_THREADS threads, load $bench_load_start"
}
