# timer vs thread pacer at half of Linden's max: client CPU, pacer CPU, server CPU per op
probe_half
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="timer 200 1000"; else order="1000 200 timer"; fi
  for p in $order; do
    if [ $p = timer ]; then a="--pacer timer"; else a="--pace-resolution $p"; fi
    c0=$(cpu_ticks $LINDEN_PID)
    echo "--- round $r pacer $p rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    B "$LINDEN_URL" --rate $HALF --connections 8 --depth 64 --duration 5 --warmup 1 $a --json $WORK/r.json | grep -v '^summary'
    t=$(( $(cpu_ticks $LINDEN_PID) - c0 ))
    cpu_per_op "$t"
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
