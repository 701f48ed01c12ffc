echo "loadavg before: $(cat /proc/loadavg)"
"$LINDEN" backup --data "$WORK/linden" "$WORK/linden2" >/dev/null
printf 'access_log = "%s"\naccess_log_format = "json"\n' "$WORK/access.log" > "$WORK/linden2.toml"
"$LINDEN" serve --config "$WORK/linden2.toml" --listen 127.0.0.1:13391 --data "$WORK/linden2" --suffix "$SUFFIX" \
  --admin-dn "$ADMIN" --admin-password "$SECRET" > "$WORK/linden2.log" 2>&1 &
L2=$!; PIDS+=("$L2")
wait_ldap ldap://127.0.0.1:13391
probe_half
for r in 1 2 3; do
  for u in "$LINDEN_URL" ldap://127.0.0.1:13391; do
    : > "$WORK/access.log"
    echo "--- round $r $u rate $HALF loadavg $(cut -d' ' -f1 /proc/loadavg)"
    c0=$(cpu_ticks $LINDEN_PID); c2=$(cpu_ticks $L2)
    B "$u" --rate $HALF --connections 8 --depth 64 --duration 4 --warmup 1 --pace-resolution 200 --json $WORK/r.json | grep -v '^summary'
    echo "server CPU ticks: linden $(( $(cpu_ticks $LINDEN_PID) - c0 )) linden-with-log $(( $(cpu_ticks $L2) - c2 ))"
    if [ "$u" != "$LINDEN_URL" ]; then
      sleep 1
      python3 - "$WORK/access.log" <<'PY'
import json, os, sys
e = []
for line in open(sys.argv[1]):
    try: o = json.loads(line)
    except Exception: continue
    if o.get("type") == "SEARCH": e.append(o["etime_us"])
e.sort()
n = len(e)
q = lambda x: e[min(n - 1, int(x * n))]
print(f"server etime (access log): searches={n} p50={q(0.5)} p90={q(0.9)} p99={q(0.99)} p99.9={q(0.999)} max={e[-1]} us")
PY
    fi
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
