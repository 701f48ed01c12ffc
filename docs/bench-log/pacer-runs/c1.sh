probe_half
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="thread timer"; else order="timer thread"; fi
  for p in $order; do
    echo "--- round $r pacer $p rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    B "$LINDEN_URL" --rate $HALF --connections 8 --depth 64 --duration 5 --warmup 1 --pacer $p | grep -v '^summary'
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
