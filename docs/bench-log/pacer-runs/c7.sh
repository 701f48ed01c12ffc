echo "loadavg before: $(cat /proc/loadavg)"
for r in 1 2; do
  for rate in 4000 26000; do
    if [ $r = 1 ]; then order="timer thread"; else order="thread timer"; fi
    for p in $order; do
      for srv in linden slapd; do
        if [ $srv = linden ]; then u=$LINDEN_URL; else u=$SLAPD_URL; fi
        echo "--- round $r $srv rate $rate pacer $p loadavg $(cut -d' ' -f1 /proc/loadavg)"
        B "$u" --rate $rate --connections 8 --depth 64 --duration 4 --warmup 1 --pacer $p | grep -v '^summary'
      done
    done
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
