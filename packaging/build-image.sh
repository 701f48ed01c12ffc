#!/usr/bin/env bash
# Builds the container image of Linden offline, with podman (or buildah), from what this
# machine has: FROM scratch, the linden binary (stripped), exactly the shared libraries it
# links (ldd), /etc/passwd and /etc/group with the user linden (uid 10389), and
# packaging/container/linden.toml as /etc/linden/linden.toml. No base image is pulled.
#
#   packaging/build-image.sh                 # release build -> localhost/linden:VERSION, :latest
#   packaging/build-image.sh --debug         # the debug build in target/debug (tests)
#   packaging/build-image.sh --no-build      # use the binary already built
#   packaging/build-image.sh --tag NAME      # another image name (repeatable)
#
# Podman's storage is its default (as root: /var/lib/containers); CONTAINERS_STORAGE_CONF
# selects another. The last line printed is the image id and its size.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
build=1
tags=()
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) profile=dev ;;
        --no-build) build=0 ;;
        --tag) shift; tags+=("${1:?--tag needs a name}") ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "build-image: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

if command -v podman >/dev/null; then
    builder=(podman build)
elif command -v buildah >/dev/null; then
    builder=(buildah bud)
else
    echo "build-image: podman or buildah is needed (Debian: apt-get install podman)" >&2
    exit 1
fi

target_dir=$(cargo metadata --format-version 1 --no-deps \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target_dir" ] || { echo "build-image: cannot find cargo's target directory" >&2; exit 1; }
if [ "$profile" = dev ]; then out_dir=debug; else out_dir=release; fi
bin="$target_dir/$out_dir/linden"
if [ "$build" = 1 ]; then
    CARGO_INCREMENTAL=0 cargo build --locked -p linden --profile "$profile"
fi
[ -x "$bin" ] || { echo "build-image: $bin is missing (build it, or drop --no-build)" >&2; exit 1; }

version=$("$bin" --version | sed 's/^linden //')       # "0.1.0 (7f0a145)"
number=${version%% *}
commit=$(echo "$version" | sed -n 's/.*(\(.*\)).*/\1/p')
[ ${#tags[@]} -gt 0 ] || tags=("localhost/linden:$number" "localhost/linden:latest")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/rootfs"
mkdir -p "$root/usr/bin" "$root/etc/linden" "$root/var/lib" "$stage/data"
chmod 0750 "$stage/data"
strip --strip-all -o "$root/usr/bin/linden" "$bin" 2>/dev/null || cp "$bin" "$root/usr/bin/linden"
chmod 0755 "$root/usr/bin/linden"

# Exactly the libraries the binary links, at the paths the loader looks for them (the loader
# itself included); nothing for a static binary.
libs=$(ldd "$bin" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' || true)
for lib in $libs; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

cat > "$root/etc/passwd" <<PASSWD
root:x:0:0:root:/:/nonexistent
linden:x:10389:10389:Linden LDAP server:/var/lib/linden:/nonexistent
PASSWD
cat > "$root/etc/group" <<GROUP
root:x:0:
linden:x:10389:
GROUP
install -m 0644 packaging/container/linden.toml "$root/etc/linden/linden.toml"

tag_args=()
for t in "${tags[@]}"; do tag_args+=(--tag "$t"); done
"${builder[@]}" --quiet --file packaging/container/Containerfile "${tag_args[@]}" \
    --label "org.opencontainers.image.title=Linden" \
    --label "org.opencontainers.image.description=Linden, an LDAPv3 directory server" \
    --label "org.opencontainers.image.version=$number" \
    --label "org.opencontainers.image.revision=$commit" \
    --label "org.opencontainers.image.licenses=Apache-2.0" \
    "$stage" >/dev/null

if command -v podman >/dev/null; then
    podman image inspect --format '{{.Id}} {{.Size}}' "${tags[0]}" \
        | awk -v name="${tags[0]}" '{ printf "%s %s %s bytes (%.1f MB)\n", name, substr($1, 1, 12), $2, $2 / 1e6 }'
else
    echo "${tags[0]}"
fi
