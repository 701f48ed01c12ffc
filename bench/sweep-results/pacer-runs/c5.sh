# timer vs thread pacer at half of Linden's max: client CPU, pacer CPU, server CPU per op
echo "loadavg before: $(cat /proc/loadavg)"
B "$LINDEN_URL" --connections 8 --depth 64 --duration 3 --warmup 1 --json $WORK/probe.json >/dev/null
MAX=$(python3 -c 'import json, os;print(round(json.load(open(os.environ["WORK"]+"/probe.json"))["total"]["ops_per_sec"]))')
HALF=$((MAX/2))
echo "linden closed-loop max $MAX/s, half $HALF/s"
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="timer 200 1000"; else order="1000 200 timer"; fi
  for p in $order; do
    if [ $p = timer ]; then a="--pacer timer"; else a="--pace-resolution $p"; fi
    c0=$(cpu_ticks $LINDEN_PID)
    echo "--- round $r pacer $p rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    B "$LINDEN_URL" --rate $HALF --connections 8 --depth 64 --duration 5 --warmup 1 $a --json $WORK/r.json | grep -v '^summary'
    t=$(( $(cpu_ticks $LINDEN_PID) - c0 ))
    python3 - "$t" "$CLK_TCK" <<'PY'
import json, os, sys
s = json.load(open(os.environ["WORK"]+"/r.json"))
ticks, hz = int(sys.argv[1]), int(sys.argv[2])
ops = s["total"]["ops_per_sec"] * (s["duration_secs"] + s["warmup_secs"])
print(f"server CPU {ticks/hz:.2f} s = {ticks/hz/ops*1e6:.1f} us/op; client CPU {s['client_cpu_secs']:.2f} s = {s['client_cpu_secs']/ops*1e6:.1f} us/op; pacer {s['pacer_cpu_secs']}")
PY
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
