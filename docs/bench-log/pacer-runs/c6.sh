probe_half
for r in 1 2; do
  if [ $r = 1 ]; then order="c8 c2 c4 c8t1 c1"; else order="c1 c8t1 c4 c2 c8"; fi
  for k in $order; do
    case $k in c8) a="--connections 8";; c2) a="--connections 2";; c4) a="--connections 4";; c1) a="--connections 1";; c8t1) a="--connections 8 --threads 1";; esac
    c0=$(cpu_ticks $LINDEN_PID)
    echo "--- round $r $k rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    B "$LINDEN_URL" --rate $HALF --depth 64 --duration 5 --warmup 1 $a --json $WORK/r.json | grep -v '^summary'
    t=$(( $(cpu_ticks $LINDEN_PID) - c0 ))
    cpu_per_op "$t"
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
