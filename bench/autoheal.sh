#!/bin/sh
# The polling baseline as docker-autoheal runs it (its docker-entrypoint, 2024): a shell loop
# that sleeps INTERVAL seconds, asks the engine with curl on its Unix socket for the labelled
# containers it reports unhealthy, has jq pick their ids, and restarts each with curl.
#   bench/autoheal.sh unix:///PATH.sock SCOPE-LABEL INTERVAL    (runs until SIGTERM)
sock=${1#unix://}
scope=$2
interval=$3
trap 'exit 143' TERM
filters=$(printf '{"health":["unhealthy"],"label":["guardian.enable=true","%s"]}' "$scope")
while true; do
    sleep "$interval" &
    wait $!
    curl -s --max-time 30 --unix-socket "$sock" -G --data-urlencode "filters=$filters" \
        http://localhost/containers/json |
        jq -r '.[].Id' |
        while read -r id; do
            curl -s -f -X POST --max-time 30 --unix-socket "$sock" \
                "http://localhost/containers/$id/restart?t=10" >/dev/null || echo "restart $id failed"
        done
done
