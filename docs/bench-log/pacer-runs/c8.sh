# client CPU of the pacers with the default runtime (one worker per core) and with --threads 1
echo "loadavg before: $(cat /proc/loadavg)"
for r in 1 2; do
  for rate in 4000 60000; do
    if [ $r = 1 ]; then order="timer thread thread-t1 timer-t1"; else order="timer-t1 thread-t1 thread timer"; fi
    for k in $order; do
      case $k in timer) a="--pacer timer";; thread) a="";; thread-t1) a="--threads 1";; timer-t1) a="--pacer timer --threads 1";; esac
      echo "--- round $r rate $rate $k loadavg $(cut -d' ' -f1 /proc/loadavg)"
      B "$LINDEN_URL" --rate $rate --connections 8 --depth 64 --duration 4 --warmup 1 $a | grep -v '^summary'
    done
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
