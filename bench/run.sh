#!/bin/sh
# bench/run.sh [BUILD_DIR] [--nginx] [bench_webhook options...] - THE command to run the webhook
# benchmark.
#
# Makes a throwaway EC P-256 CA and a leaf for the webhook's Service name
# (DNS:gpustack-worker-webhook.gpustack-system.svc, IP:127.0.0.1) with openssl in a temporary
# directory, builds BUILD_DIR (default: build; set up with meson when missing), and runs
# bench_webhook with them. With --nginx it also starts Debian's nginx (installing nginx-light
# with apt-get when it is missing and this runs as root) on a free loopback port with the same
# certificate, TLS 1.3 only, answering every request with a fixed AdmissionReview response, and
# passes its port to bench_webhook (--nginx-port), which drives it with the same client. Further
# arguments go to bench_webhook, for example
#   bench/run.sh build-rel --nginx --seconds 5 --concurrency 1,4,16 --threads 8
set -eu
. "$(dirname "$0")/common.sh"
bench_build "${1:-build}" bench/bench_webhook
[ $# -gt 0 ] && shift
nginx=no
if [ "${1:-}" = --nginx ]; then
	nginx=yes
	shift
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
(
	cd "$tmp"
	ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>>openssl.log; }
	ec ca.key
	openssl req -x509 -new -key ca.key -out ca.crt -days 1 -subj "/CN=tessera-bench-ca" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>>openssl.log
	ec tls.key
	openssl req -new -key tls.key -out tls.csr \
		-subj "/CN=gpustack-worker-webhook.gpustack-system.svc" 2>>openssl.log
	printf '%s\n' \
		'subjectAltName=DNS:gpustack-worker-webhook.gpustack-system.svc,IP:127.0.0.1' \
		'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature' \
		'basicConstraints=CA:FALSE' >tls.ext
	openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -set_serial 2 -days 1 \
		-extfile tls.ext -out tls.crt 2>>openssl.log
) || { cat "$tmp/openssl.log" >&2; exit 1; }

if [ $nginx = yes ]; then
	if ! command -v nginx >/dev/null 2>&1; then
		[ "$(id -u)" = 0 ] || { echo "bench: --nginx needs nginx (apt-get install nginx-light)" >&2; exit 1; }
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >"$tmp/apt.log" 2>&1 ||
			{ cat "$tmp/apt.log" >&2; exit 1; }
	fi
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	body='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}'
	mkdir "$tmp/nginx"
	cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes auto;
daemon off;
user root;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 8192; }
http {
	access_log off;
	client_body_temp_path $tmp/nginx;
	proxy_temp_path $tmp/nginx;
	fastcgi_temp_path $tmp/nginx;
	uwsgi_temp_path $tmp/nginx;
	scgi_temp_path $tmp/nginx;
	keepalive_requests 100000000;
	keepalive_timeout 300s;
	client_max_body_size 4m;
	server {
		listen 127.0.0.1:$port ssl;
		ssl_certificate $tmp/tls.crt;
		ssl_certificate_key $tmp/tls.key;
		ssl_protocols TLSv1.3;
		location / {
			default_type application/json;
			return 200 '$body';
		}
	}
}
EOF
	nginx -t -q -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf"
	nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" &
	nginx_pid=$!
	trap 'kill $nginx_pid 2>/dev/null; wait $nginx_pid 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
	i=0
	until python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 50 ] || { cat "$tmp/nginx/error.log" >&2; exit 1; }
		sleep 0.1
	done
	set -- --nginx-port "$port" "$@"
	printf 'nginx:      %s\n' "$(nginx -v 2>&1)"
fi
"$build/bench/bench_webhook" --cert "$tmp/tls.crt" --key "$tmp/tls.key" --ca "$tmp/ca.crt" "$@"
