#!/bin/sh
# gen_certs.sh DIR - throwaway TLS material for the fake API server, made with openssl:
#   ca.crt ca.key              a CA
#   server.crt server.key      signed by it, SAN localhost, 127.0.0.1 and ::1 (serverAuth)
#   client.crt client.key      signed by it, CN tessera-client (clientAuth)
#   other-ca.crt               an unrelated CA, for "wrong CA" checks
# EC P-256 keys, valid for two days. Quiet unless openssl fails.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
log=gen_certs.log
: >"$log"
ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>>"$log"; }

ec ca.key
openssl req -x509 -new -key ca.key -out ca.crt -days 2 -subj "/CN=tessera-test-ca" \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
	2>>"$log"

ec server.key
openssl req -new -key server.key -out server.csr -subj "/CN=fake-apiserver" 2>>"$log"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' >server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 2 -days 2 \
	-extfile server.ext -out server.crt 2>>"$log"

ec client.key
openssl req -new -key client.key -out client.csr -subj "/CN=tessera-client" 2>>"$log"
printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n' >client.ext
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -set_serial 3 -days 2 \
	-extfile client.ext -out client.crt 2>>"$log"

ec other-ca.key
openssl req -x509 -new -key other-ca.key -out other-ca.crt -days 2 -subj "/CN=other-ca" \
	-addext "basicConstraints=critical,CA:TRUE" 2>>"$log"
rm -f server.csr client.csr server.ext client.ext
