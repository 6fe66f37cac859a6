# Sourced by the stand-in's kubectl and Helm suites after checks.sh: the server they drive.
#   source standin_or_real.sh APISERVER_BINARY [SERVER ARGS...]   starts the stand-in (TLS, token)
#   source standin_or_real.sh --kubeconfig=FILE                   uses the server FILE names
# Sets KUBECONFIG, base (https://host:port), server_version (what `kubectl version` must name), and
# defines standin/real (which one runs), api (curl with the bearer token), admin (the stand-in's
# fault and request-log endpoints) and portable_done/finish (the result: portable_done ends a real
# run where the checks that need the stand-in begin).
if [[ "$1" == --kubeconfig=* ]]; then
  server_mode=real
  export KUBECONFIG=${1#--kubeconfig=}
  base=$(python3 -c 'import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); print(c["clusters"][0]["cluster"]["server"])' "$KUBECONFIG")
  token=$(python3 -c 'import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); print(c["users"][0]["user"]["token"])' "$KUBECONFIG")
  server_version="Server Version: v1."
  : > "$work/server.log"
else
  server_mode=standin
  server_bin=$1
  shift
  "$server_bin" --tls --cert-dir "$work/certs" --token s3cret --kubeconfig "$work/kubeconfig" \
    --port-file "$work/port" "$@" > "$work/server.log" 2>&1 &
  server_pid=$!
  eventually 100 [ -s "$work/port" ]
  [ -s "$work/port" ] || { cat "$work/server.log"; echo "FAIL: the server did not start" >&2; exit 1; }
  export KUBECONFIG=$work/kubeconfig
  base="https://127.0.0.1:$(cat "$work/port")"
  token=s3cret
  server_version="v1.35.0-kgpu-apiserver"
fi
standin() { [ "$server_mode" = standin ]; }
real() { [ "$server_mode" = real ]; }
api() { curl -sk -H "Authorization: Bearer $token" "$@"; }
admin() { curl -sk -X "$1" "$base/standin/v1/$2" ${3:+-d "$3"}; }
# finish SUITE: exits with the suite's result.
finish() {
  [ "$failures" -eq 0 ] || { echo "$failures failure(s) against the $server_mode server; its log:" >&2; tail -20 "$work/server.log" >&2; exit 1; }
  echo "all $1 checks passed against the $server_mode server"
  exit 0
}
# portable_done SUITE: a real server's run ends here.
portable_done() { real && finish "$1"; return 0; }
