#!/usr/bin/env bash
# tools/peers.sh - builds the tests' real peers from their pinned Go modules, once per machine.
#
#   tools/peers.sh build [PEER...]  build what is missing from the cache (say what, and how long
#                           it took); the Kueue peer also keeps Kueue's CRDs and webhook manifests
#   tools/peers.sh bin      print the directory holding every peer's binary; exit 1 if one is unbuilt
#   tools/peers.sh list     print each peer, its pinned module and whether it is built
#
# The peers (tools/peers/README.md says what each wrapper module is):
#   etcd        go.etcd.io/etcd/server/v3          tools/peers/etcd
#   kubernetes  k8s.io/kubernetes (kube-apiserver, kube-scheduler, kubectl)  tools/peers/kubernetes
#   kueue       sigs.k8s.io/kueue/cmd/kueue        tools/peers/kueue
#   helm        helm.sh/helm/v4/cmd/helm           tools/peers/helm
#   helm3       helm.sh/helm/v3/cmd/helm (as helm3: the chart is checked with both majors)  tools/peers/helm3
#   kubelet-go  the grpc-go fake kubelet (ours)    tests/peers/kubelet-go
#
# Each peer is cached under $TESSERA_PEERS_CACHE (default /var/cache/tessera-peers, or
# ~/.cache/tessera-peers when that is not writable) in a folder named by the SHA-256 of what decides
# its bytes: its go.mod and go.sum (and, for our own fake kubelet, its .go files), the build recipe
# below and the Go version. A folder is used only once its stamp file is written, so an interrupted
# build is redone. `bin` links every peer's binaries into one folder keyed by all the hashes.
#
# Builds run one at a time (a link step takes 1-3 GB; two at once can exhaust a 2-core machine), with
# CGO_ENABLED=0 and GOTOOLCHAIN=local, so a go line newer than the installed Go fails loudly instead of
# downloading a toolchain. When the module proxy refuses a module, the failure names it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=2 # bump when a build command below changes
K8S_VERSION=v1.36.3
K8S_MINOR=36

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly

cache_root() {
	if [ -n "${TESSERA_PEERS_CACHE:-}" ]; then
		echo "$TESSERA_PEERS_CACHE"
	elif mkdir -p /var/cache/tessera-peers 2>/dev/null && [ -w /var/cache/tessera-peers ]; then
		echo /var/cache/tessera-peers
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/tessera-peers"
	fi
}

# The peers: name, module directory, binaries.
PEERS=(etcd kubernetes kueue helm helm3 kubelet-go)
peer_dir() {
	case $1 in
	kubelet-go) echo "$ROOT/tests/peers/kubelet-go" ;;
	*) echo "$ROOT/tools/peers/$1" ;;
	esac
}
peer_bins() {
	case $1 in
	etcd) echo etcd ;;
	kubernetes) echo kube-apiserver kube-scheduler kube-controller-manager kubectl ;;
	kueue) echo kueue ;;
	helm) echo helm ;;
	helm3) echo helm3 ;;
	kubelet-go) echo fake-kubelet-go ;;
	esac
}
# The version go.mod pins for a module.
mod_version() {
	awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { v = ($1 == "require") ? $3 : $2 } END { print v }' \
		"$(peer_dir "$1")/go.mod"
}
peer_module() {
	case $1 in
	etcd) echo "go.etcd.io/etcd/server/v3@$(mod_version etcd go.etcd.io/etcd/server/v3)" ;;
	kubernetes) echo "k8s.io/kubernetes@$(mod_version kubernetes k8s.io/kubernetes)" ;;
	kueue) echo "sigs.k8s.io/kueue@$(mod_version kueue sigs.k8s.io/kueue)" ;;
	helm) echo "helm.sh/helm/v4@$(mod_version helm helm.sh/helm/v4)" ;;
	helm3) echo "helm.sh/helm/v3@$(mod_version helm3 helm.sh/helm/v3)" ;;
	kubelet-go) echo "tests/peers/kubelet-go (k8s.io/kubelet@$(mod_version kubelet-go k8s.io/kubelet), grpc-go)" ;;
	esac
}

go_version() { go env GOVERSION; }

peer_hash() {
	local name=$1 dir
	dir=$(peer_dir "$name")
	{
		echo "recipe $RECIPE $name $(go_version) $K8S_VERSION"
		cat "$dir/go.mod" "$dir/go.sum"
		if [ "$name" = kubelet-go ]; then
			find "$dir" -maxdepth 1 -name '*.go' -print0 | sort -z | xargs -0 cat
		fi
	} | sha256sum | cut -c1-16
}

peer_path() { echo "$(cache_root)/$1-$(peer_hash "$1")"; }
peer_built() { [ -f "$(peer_path "$1")/stamp" ]; }

# The ldflags that make kube-apiserver, kube-scheduler and kubectl report their release: without
# them the server says v0.0.0-master+$Format:%H$ and Kueue, which parses it as semver, exits.
k8s_ldflags() {
	local p=k8s.io/component-base/version c=k8s.io/client-go/pkg/version
	echo "-s -w -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR" \
		"-X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean" \
		"-X $p.buildDate=1970-01-01T00:00:00Z" \
		"-X $c.gitVersion=$K8S_VERSION -X $c.gitMajor=1 -X $c.gitMinor=$K8S_MINOR"
}

# go_build NAME OUT: the build command of one peer, run in its module directory.
go_build() {
	local name=$1 out=$2
	case $name in
	etcd) go build -p 2 -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3 ;;
	kubernetes)
		go build -p 2 -trimpath -ldflags "$(k8s_ldflags)" -o "$out/" \
			k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
			k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kubectl
		;;
	kueue)
		go build -p 2 -trimpath -ldflags "-s -w" -o "$out/kueue" sigs.k8s.io/kueue/cmd/kueue
		# Kueue's CRDs and webhook manifests, from the module zip, for the harness to apply.
		local src
		src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
		mkdir -p "$out/../share/kueue"
		cp -R "$src/config/components/crd/bases" "$out/../share/kueue/crds"
		cp "$src/config/components/webhook/manifests.yaml" "$out/../share/kueue/webhooks.yaml"
		chmod -R u+w "$out/../share"
		;;
	helm)
		# As helm's release build: the version it reports is the pinned module's.
		go build -p 2 -trimpath -o "$out/helm" -ldflags \
			"-s -w -X helm.sh/helm/v4/internal/version.version=$(mod_version helm helm.sh/helm/v4)" \
			helm.sh/helm/v4/cmd/helm
		;;
	helm3)
		go build -p 2 -trimpath -o "$out/helm3" -ldflags \
			"-s -w -X helm.sh/helm/v3/internal/version.version=$(mod_version helm3 helm.sh/helm/v3)" \
			helm.sh/helm/v3/cmd/helm
		;;
	kubelet-go) go build -p 2 -trimpath -ldflags "-s -w" -o "$out/fake-kubelet-go" . ;;
	esac
}

# Names the module the proxy refused, from go's own words in the log.
explain_failure() {
	local log=$1 refused
	refused=$(grep -oE '[A-Za-z0-9._~/-]+@v[0-9][A-Za-z0-9.+-]*: (reading|verifying|invalid version|unknown revision).*' "$log" |
		head -n 3 || true)
	if [ -n "$refused" ]; then
		echo "peers: the module proxy ($(go env GOPROXY)) refused:" >&2
		sed 's/^/    /' <<<"$refused" >&2
	fi
	echo "peers: last lines of the build log ($log):" >&2
	tail -n 25 "$log" | sed 's/^/    /' >&2
}

build_one() {
	local name=$1 dest tmp log start end
	dest=$(peer_path "$name")
	if peer_built "$name"; then
		echo "peers: $name: cached ($(cut -d' ' -f2- "$dest/stamp")) at $dest"
		return 0
	fi
	echo "peers: $name: building $(peer_module "$name") -> $(peer_bins "$name")"
	mkdir -p "$(dirname "$dest")"
	tmp="$dest.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/bin"
	log="$tmp/build.log"
	start=$(date +%s)
	if ! (cd "$(peer_dir "$name")" && go mod download && go_build "$name" "$tmp/bin") >"$log" 2>&1; then
		explain_failure "$log"
		echo "peers: $name: build FAILED after $(($(date +%s) - start)) s" >&2
		rm -rf "${dest}.failed"
		mv "$tmp" "${dest}.failed"
		return 1
	fi
	end=$(date +%s)
	echo "built in $((end - start)) s on $(nproc) cores with $(go_version)" >"$tmp/stamp"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	echo "peers: $name: built in $((end - start)) s ($(du -sh "$dest/bin" | cut -f1))"
}

# One folder of links to every peer's binaries, named by all their hashes.
link_dir() {
	local key="" name
	for name in "${PEERS[@]}"; do
		key+="$name-$(peer_hash "$name") "
	done
	echo "$(cache_root)/bin-$(echo "$key" | sha256sum | cut -c1-16)"
}

make_links() {
	local dir name b
	dir=$(link_dir)
	if [ -d "$dir" ]; then
		return 0
	fi
	rm -rf "$dir.tmp.$$"
	mkdir -p "$dir.tmp.$$"
	for name in "${PEERS[@]}"; do
		for b in $(peer_bins "$name"); do
			ln -s "$(peer_path "$name")/bin/$b" "$dir.tmp.$$/$b"
		done
	done
	mv "$dir.tmp.$$" "$dir"
}

need_go() {
	if ! command -v go >/dev/null 2>&1; then
		if [ -x /usr/local/go/bin/go ]; then
			export PATH="/usr/local/go/bin:$PATH"
		else
			echo "peers: go not found (expected /usr/local/go/bin/go): the cluster peers cannot be built" >&2
			exit 1
		fi
	fi
}

cmd=${1:-build}
need_go
case $cmd in
build)
	total_start=$(date +%s)
	echo "peers: cache $(cache_root); $(go_version); GOPROXY=$(go env GOPROXY)"
	status=0
	shift || true
	for name in "${@:-${PEERS[@]}}"; do
		build_one "$name" || status=1
	done
	if [ "$status" -ne 0 ]; then
		echo "peers: not every peer was built; the cluster suites will fail until they are" >&2
		exit 1
	fi
	for name in "${PEERS[@]}"; do
		peer_built "$name" || exit 0
	done
	make_links
	echo "peers: ready in $(($(date +%s) - total_start)) s: $(link_dir)"
	;;
bin)
	for name in "${PEERS[@]}"; do
		if ! peer_built "$name"; then
			echo "peers: $name is not built; run tools/peers.sh build" >&2
			exit 1
		fi
	done
	make_links
	link_dir
	;;
list)
	for name in "${PEERS[@]}"; do
		if peer_built "$name"; then state="built: $(cut -d' ' -f2- "$(peer_path "$name")/stamp")"; else state="not built"; fi
		printf '%-11s %s\n            %s\n            %s\n' "$name" "$(peer_module "$name")" "$(peer_path "$name")" "$state"
	done
	;;
*)
	echo "usage: tools/peers.sh build|bin|list" >&2
	exit 2
	;;
esac
