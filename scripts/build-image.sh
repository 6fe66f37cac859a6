#!/usr/bin/env bash
# Builds kgpu's OCI image from a build directory, without a container engine (docs/image.md).
#
# Usage: scripts/build-image.sh BUILD_DIR OUT_DIR
# Writes OUT_DIR/kgpu-<version>.oci.tar: an OCI image layout in a tar, one image tagged <version>
# (the CMake project version). Prints the manifest digest and the sizes last.
#
# Contract:
# - The root file system holds /usr/bin/kgpu (BUILD_DIR/kgpu without debug info), /usr/bin/kubectl-gpu
#   (a link to it), exactly the shared libraries the binary loads (its ldd closure), Debian's CA
#   bundle, /etc/passwd and /etc/group (root and kgpu, 65532), nsswitch.conf, os-release, and for
#   each Debian package a file came from its copyright file and its control record
#   (/var/lib/dpkg/status.d/<package>, for vulnerability scanners). No shell, no package manager.
# - Every library, the CA certificates and os-release are the files the owning Debian packages
#   installed here (dpkg-query -S), at the installed versions, each checked against the MD5 dpkg
#   recorded at installation: the image holds the bytes the tests ran against, and needs no network.
# - Reproducible: SOURCE_DATE_EPOCH (default: the commit time of HEAD) is every file's mtime and the
#   config's and history's created time; owners are 0:0, modes are the packages' (0644/0755 for the
#   rest), entries sorted, gzip without a timestamp. The same commit, build and installed package
#   versions give the same digest.
#
# Environment: SOURCE_DATE_EPOCH, KGPU_IMAGE_NAME (default ghcr.io/kgpu/kgpu; the push hint only).
set -euo pipefail
export LC_ALL=C
umask 022  # files this script writes are 0644, directories 0755; packaged files keep their modes
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: build-image.sh BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: build-image.sh BUILD_DIR OUT_DIR}
image_name=${KGPU_IMAGE_NAME:-ghcr.io/kgpu/kgpu}

die() { echo "build-image: $*" >&2; exit 1; }
for tool in umoci dpkg-query objcopy ldd git; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/setup.sh installs it)"
done
binary=$build/kgpu
[ -x "$binary" ] || die "$binary does not exist: build first (make build)"
if readelf -d "$binary" | grep -q 'NEEDED.*lib\(a\|ub\)san'; then
  die "$binary is a sanitizer build; image a release build (build/, RelWithDebInfo)"
fi

version=$(sed -n 's/^project(kgpu VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || die "no project(kgpu VERSION ...) in $src/CMakeLists.txt"
revision=$(git -C "$src" rev-parse HEAD)
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "build-image: the working tree differs from $revision: the image is labelled $revision-dirty" >&2
  revision=$revision-dirty
fi
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
arch=$(dpkg --print-architecture)

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kgpu-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"

# The merged-/usr layout of Debian 12: /lib and /lib64 are links into /usr.
usr_path() {  # packaged path -> path in the image
  case $1 in
    /lib/* | /lib64/* | /bin/* | /sbin/*) echo "/usr$1" ;;
    *) echo "$1" ;;
  esac
}

owner_of() {  # owner_of PATH... -> "package:arch: path" for the first PATH a package owns
  { dpkg-query -S "$@" 2>/dev/null || true; } | grep -v '^diversion' | head -1
}

# --- Which packages: the owners of the files the loader maps for kgpu, resolved here. ---
declare -A pkg_paths=()  # package:arch -> packaged paths of the libraries it provides
libs=$(ldd "$binary") || die "ldd $binary failed"
if grep -q 'not found' <<<"$libs"; then die "unresolved libraries: $(grep 'not found' <<<"$libs")"; fi
mapfile -t lib_list < <(awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$libs" | sort -u)
# A library the loader found under /lib is packaged under /lib or /usr/lib (and the other way round).
candidates=()
for lib in "${lib_list[@]}"; do
  case $lib in
    /usr/*) candidates+=("$lib" "${lib#/usr}") ;;
    *) candidates+=("$lib" "/usr$lib") ;;
  esac
done
declare -A owner_by_path=()
while IFS= read -r line; do
  owner_by_path[${line#*: }]=${line%%: *}
done < <({ dpkg-query -S "${candidates[@]}" 2>/dev/null || true; } | grep -v '^diversion')
for lib in "${lib_list[@]}"; do
  found=
  for path in "$lib" "${lib#/usr}" "/usr$lib"; do
    if [ -n "${owner_by_path[$path]:-}" ]; then
      pkg_paths[${owner_by_path[$path]}]+="$path "
      found=1
      break
    fi
  done
  [ -n "$found" ] || die "no Debian package owns $lib"
done

# md5_of PACKAGE PATH -> the MD5 dpkg recorded for PATH when it installed PACKAGE (files or conffiles).
md5_of() {
  local pkg=$1 path=$2 info=/var/lib/dpkg/info sum
  sum=$({ cat "$info/$pkg.md5sums" "$info/${pkg%%:*}.md5sums" 2>/dev/null || true; } |
    awk -v p="${path#/}" '$2 == p {print $1; exit}')
  [ -n "$sum" ] || sum=$(dpkg-query -W -f='${Conffiles}\n' "$pkg" | awk -v p="$path" '$1 == p {print $2; exit}')
  echo "$sum"
}

# take PACKAGE PATH: PATH as PACKAGE installed it here into the image, following the links PACKAGE
# installed to the file they name, which must match dpkg's checksum; prints that file's path.
take() {
  local pkg=$1 path=$2 target sum
  while [ -L "$path" ]; do
    target=$(readlink "$path")
    mkdir -p "$root$(dirname "$(usr_path "$path")")"
    ln -sfn "$target" "$root$(usr_path "$path")"
    case $target in
      /*) path=$target ;;
      *) path=$(dirname "$path")/$target ;;
    esac
    path=$(realpath -m -s "$path")
  done
  [ -f "$path" ] || die "$path (of $pkg) is missing here"
  sum=$(md5_of "$pkg" "$path")
  [ -n "$sum" ] || die "$pkg has no checksum for $path"
  [ "$(md5sum < "$path" | cut -d' ' -f1)" = "$sum" ] || die "$path differs from the file $pkg installed (dpkg --verify ${pkg%%:*})"
  install -D -m "$(stat -c %a "$path")" "$path" "$root$(usr_path "$path")"
  echo "$path"
}

declare -A recorded=()
record_package() {  # the copyright file and the dpkg record of an included package
  local pkg=$1 name=${1%%:*} doc=/usr/share/doc/${1%%:*} target owner
  [ -n "${recorded[$name]:-}" ] && return
  recorded[$name]=1
  mkdir -p "$root/var/lib/dpkg/status.d"
  dpkg-query -s "$pkg" > "$root/var/lib/dpkg/status.d/$name"
  if [ -L "$doc" ]; then
    # The package shares its source package's documentation directory (libstdc++6 -> gcc-12-base):
    # keep the link and take the copyright from the package that holds it.
    target=$(readlink "$doc")
    mkdir -p "$root/usr/share/doc"
    ln -sfn "$target" "$root$doc"
    owner=$(owner_of "/usr/share/doc/$target/copyright")
    [ -n "$owner" ] || die "no package holds /usr/share/doc/$target/copyright"
    record_package "${owner%%: *}"
  else
    take "$pkg" "$doc/copyright" >/dev/null
  fi
}

for pkg in $(printf '%s\n' "${!pkg_paths[@]}" | sort); do
  for path in ${pkg_paths[$pkg]}; do take "$pkg" "$path" >/dev/null; done
  record_package "$pkg"
done

# --- CA certificates: Debian's default bundle (every Mozilla certificate of ca-certificates,
# concatenated as update-ca-certificates does); the build machine's local CAs are not copied. ---
certs=/usr/share/ca-certificates
mkdir -p "$root/etc/ssl/certs"
for crt in $(cd "$certs" && find mozilla -name '*.crt' | sort); do
  [ "$(md5sum < "$certs/$crt" | cut -d' ' -f1)" = "$(md5_of ca-certificates "$certs/$crt")" ] ||
    die "$certs/$crt differs from the file ca-certificates installed"
  sed -e '$a\' "$certs/$crt"
done > "$root/etc/ssl/certs/ca-certificates.crt"
grep -q 'BEGIN CERTIFICATE' "$root/etc/ssl/certs/ca-certificates.crt" || die "empty CA bundle"
record_package ca-certificates

# --- os-release and debian_version from base-files: they name the distribution of the libraries
# (vulnerability scanners match status.d against Debian 12's advisories). ---
take base-files /usr/lib/os-release >/dev/null
take base-files /etc/debian_version >/dev/null
ln -s ../usr/lib/os-release "$root/etc/os-release"
record_package base-files

# --- The binary: debug info stripped. The build ID goes too: the linker hashes the debug info into
# it, and that holds the build directory's paths (ccache shares objects across directories), so the
# same code would get different IDs. ---
install -d -m 0755 "$root/usr/bin"
objcopy --strip-debug --remove-section=.note.gnu.build-id "$binary" "$root/usr/bin/kgpu"
chmod 0755 "$root/usr/bin/kgpu"
ln -s kgpu "$root/usr/bin/kubectl-gpu"

# --- Users, name service, links of the merged-/usr layout, /tmp. ---
printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' 'kgpu:x:65532:65532:kgpu:/nonexistent:/usr/sbin/nologin' \
  > "$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'kgpu:x:65532:' > "$root/etc/group"
# Without this file glibc asks DNS before /etc/hosts.
printf '%s\n' 'passwd: files' 'group: files' 'shadow: files' 'hosts: files dns' 'networks: files' \
  'protocols: files' 'services: files' > "$root/etc/nsswitch.conf"
ln -s usr/lib "$root/lib"
[ -d "$root/usr/lib64" ] && ln -s usr/lib64 "$root/lib64"
install -d -m 1777 "$root/tmp"

for tool in sh bash dash dpkg apt apt-get; do
  [ -z "$(find "$root" ! -type d -name "$tool" -print -quit)" ] || die "$tool found in the image"
done

# reproducible_tar DIR OUT NAMES...: a POSIX tar with sorted entries, fixed times and owners.
reproducible_tar() {
  local dir=$1 tarfile=$2
  shift 2
  tar --sort=name --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --no-acls --no-xattrs --no-selinux \
    -C "$dir" -cf "$tarfile" "$@"
}
reproducible_tar "$root" "$work/layer.tar" $(ls -A "$root" | sort)

# --- The image: umoci writes the OCI layout (blobs, manifest, config, index). ---
layout=$work/layout
ref=$layout:$version
umoci init --layout "$layout"
umoci new --image "$ref"
umoci raw add-layer --image "$ref" --history.created="$created" \
  --history.created_by="scripts/build-image.sh (kgpu $version, $revision)" "$work/layer.tar"
umoci config --image "$ref" --no-history --created="$created" --os=linux --architecture="$arch" \
  --config.user=65532:65532 --config.entrypoint=/usr/bin/kgpu --config.env=PATH=/usr/bin \
  --config.label="org.opencontainers.image.title=kgpu" \
  --config.label="org.opencontainers.image.description=The GPU layer of Kubernetes: scheduling, sharing and monitoring of NVIDIA GPUs (node agent, scheduler extender, doctor, lint)" \
  --config.label="org.opencontainers.image.version=$version" \
  --config.label="org.opencontainers.image.revision=$revision" \
  --config.label="org.opencontainers.image.created=$created" \
  --config.label="org.opencontainers.image.source=https://github.com/kgpu/kgpu"
umoci gc --layout "$layout"

archive=$out/kgpu-$version.oci.tar
chmod -R u=rwX,go=rX "$layout"  # umoci writes its blobs 0600
reproducible_tar "$layout" "$archive.part" oci-layout index.json blobs
mv "$archive.part" "$archive"

digest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$layout/index.json")
compressed=$(du -cb --apparent-size "$layout/blobs/sha256"/* | tail -1 | cut -f1)
unpacked=$(find "$root" -type f -printf '%s\n' | awk '{n += $1} END {print n}')
echo "image: $archive (tag $version, $arch)"
echo "push:  skopeo copy oci-archive:$archive:$version docker://$image_name:$version"
echo "size:  $compressed bytes compressed (all blobs), $unpacked bytes unpacked (files)"
echo "digest: $digest"
