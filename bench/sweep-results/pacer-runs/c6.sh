echo "loadavg before: $(cat /proc/loadavg)"
B "$LINDEN_URL" --connections 8 --depth 64 --duration 3 --warmup 1 --json $WORK/probe.json >/dev/null
MAX=$(python3 -c 'import json, os;print(round(json.load(open(os.environ["WORK"]+"/probe.json"))["total"]["ops_per_sec"]))')
HALF=$((MAX/2))
echo "linden closed-loop max $MAX/s, half $HALF/s"
for r in 1 2; do
  if [ $r = 1 ]; then order="c8 c2 c4 c8t1 c1"; else order="c1 c8t1 c4 c2 c8"; fi
  for k in $order; do
    case $k in c8) a="--connections 8";; c2) a="--connections 2";; c4) a="--connections 4";; c1) a="--connections 1";; c8t1) a="--connections 8 --threads 1";; esac
    c0=$(cpu_ticks $LINDEN_PID)
    echo "--- round $r $k rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    B "$LINDEN_URL" --rate $HALF --depth 64 --duration 5 --warmup 1 $a --json $WORK/r.json | grep -v '^summary'
    t=$(( $(cpu_ticks $LINDEN_PID) - c0 ))
    python3 - "$t" "$CLK_TCK" <<'PY'
import json, os, sys
s = json.load(open(os.environ["WORK"]+"/r.json"))
ticks, hz = int(sys.argv[1]), int(sys.argv[2])
ops = s["total"]["ops_per_sec"] * (s["duration_secs"] + s["warmup_secs"])
print(f"server CPU {ticks/hz/ops*1e6:.1f} us/op; client CPU {s['client_cpu_secs']/ops*1e6:.1f} us/op")
PY
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
