probe_half
for r in 1 2; do
  if [ $((r%2)) = 1 ]; then order="50 200 500 timer"; else order="timer 500 200 50"; fi
  for p in $order; do
    if [ $p = timer ]; then a="--pacer timer"; else a="--pace-resolution $p"; fi
    echo "--- round $r pacer $p rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    B "$LINDEN_URL" --rate $HALF --connections 8 --depth 64 --duration 4 --warmup 1 $a | grep -v '^summary'
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
