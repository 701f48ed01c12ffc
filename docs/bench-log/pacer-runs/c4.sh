# run-queue waits: sum of field 2 of /proc/PID/task/*/schedstat (ns)
rqwait() { cat /proc/$1/task/*/schedstat 2>/dev/null | awk '{w+=$2; c+=$1} END {printf "%d %d\n", w/1000, c/1000}'; }
probe_half
for r in 1 2; do
  if [ $r = 1 ]; then order="8 2 32 8t1"; else order="8t1 32 2 8"; fi
  for c in $order; do
    extra=""; conns=$c
    if [ $c = 8t1 ]; then conns=8; extra="--threads 1"; fi
    echo "--- round $r connections $c rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    read -r s0 sc0 < <(rqwait $LINDEN_PID)
    B "$LINDEN_URL" --rate $HALF --connections $conns --depth 64 --duration 4 --warmup 1 $extra > $WORK/b.out &
    bp=$!
    last="0 0"
    while kill -0 $bp 2>/dev/null; do x=$(rqwait $bp); [ -n "$x" ] && last=$x; sleep 0.3; done
    wait $bp || true
    grep -v '^summary' $WORK/b.out
    read -r s1 sc1 < <(rqwait $LINDEN_PID)
    echo "server: run-queue wait $(( (s1-s0)/1000 )) ms, on-CPU $(( (sc1-sc0)/1000 )) ms; client (whole run): run-queue wait $(( ${last% *}/1000 )) ms, on-CPU $(( ${last#* }/1000 )) ms"
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
