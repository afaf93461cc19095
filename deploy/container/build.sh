#!/usr/bin/env bash
# Build the offset manager's image (deploy/container/Containerfile) with podman, else docker,
# and print its size.
#
#   bash deploy/container/build.sh            # tag: $IMAGE (localhost/spark-consumer-offsets:latest)
#
# What deploy/setup.sh already resolved is reused, so a build needs no network but the package
# registries: the connector's jars (.runtime/jars/spark) and the lock's wheels, made once per
# requirements.lock into .runtime/wheels (`pip wheel`, from pip's cache after setup). Without a
# .venv pip and Maven fetch them inside the build. The base is $BASE_IMAGE, else the official
# debian:bookworm-slim when it is present or can be pulled, else an equivalent one made here from
# Debian's packages with debootstrap (root; once: reused while present).
# Environment: IMAGE, BASE_IMAGE, CONTAINER_ENGINE (podman or docker).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

image=${IMAGE:-localhost/spark-consumer-offsets:latest}
official_base=docker.io/library/debian:bookworm-slim
local_base=localhost/consumer-offsets-base:bookworm
context=.runtime/container/context
wheels=.runtime/wheels
engine=${CONTAINER_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
command -v "$engine" >/dev/null || {
  echo "build: neither podman nor docker is installed" >&2
  exit 1
}

# Podman here: runc (crun refuses a hybrid cgroup layout), cgroupfs (no systemd), the host's
# network, and ulimits within the host's (podman's defaults ask for more and fail).
engine_args=() build_args=()
if [ "$engine" = podman ]; then
  command -v runc >/dev/null && engine_args+=(--runtime runc)
  engine_args+=(--cgroup-manager=cgroupfs)
  # docker format: OCI images have no HEALTHCHECK.
  build_args+=(--format docker --ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
fi
engine() { "$engine" "${engine_args[@]}" "$@"; }
has_image() { engine image inspect "$1" >/dev/null 2>&1; }

# A base equivalent to debian:bookworm-slim: minbase, without documentation, apt's lists emptied.
make_local_base() {
  local mirror rootfs
  mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  rootfs=$(mktemp -d)
  echo "build: making $local_base with debootstrap (${mirror:=http://deb.debian.org/debian})"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  printf 'path-exclude /usr/share/%s/*\n' doc man info locale >"$rootfs/etc/dpkg/dpkg.cfg.d/slim"
  rm -rf "$rootfs"/usr/share/{doc,man,info,locale}/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
  tar -C "$rootfs" -c . | engine import - "$local_base" >/dev/null
  rm -rf "$rootfs"
}

base=${BASE_IMAGE:-}
if [ -z "$base" ]; then
  if has_image "$official_base" ||
    { ! has_image "$local_base" && timeout 30 "$engine" pull -q "$official_base" >/dev/null 2>&1; }; then
    base=$official_base
  else
    has_image "$local_base" || make_local_base
    base=$local_base
  fi
fi

# The context (hard links, no copies): lock/, wheels/, jars/spark/, project/ (Containerfile).
rm -rf "$context"
mkdir -p "$context"/{lock,wheels,jars,project}
cp -l requirements.lock pyproject.toml deploy/pom.xml deploy/container/runtime_lock.py "$context/lock/"
cp -l deploy/container/healthcheck.py "$context/"
no_index=false
if [ -x .venv/bin/python ]; then
  pip=(.venv/bin/python -m pip -q --disable-pip-version-check)
  key=$(sha256sum requirements.lock | cut -c1-16)
  if [ "$(cat "$wheels/.lock" 2>/dev/null)" != "$key" ]; then
    rm -rf "$wheels"
    "${pip[@]}" wheel --require-hashes -r requirements.lock -w "$wheels"
    echo "$key" >"$wheels/.lock"
  fi
  cp -l "$wheels"/*.whl "$context/wheels/"
  "${pip[@]}" wheel --no-deps -w "$context/project" .
  no_index=true
else
  git ls-files -z -co --exclude-standard -- pyproject.toml README.md state streaming connectors |
    tar --null -T - --ignore-failed-read -c 2>/dev/null | tar -x -C "$context/project"
fi
if compgen -G ".runtime/jars/spark/spark-sql-kafka-0-10_*.jar" >/dev/null; then
  cp -al .runtime/jars/spark "$context/jars/spark"
fi
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] && build_args+=(--secret "id=ca,src=$ca")

echo "build: $image from $base ($engine)"
t0=$(date +%s)
engine build -q "${build_args[@]}" --network=host -f deploy/container/Containerfile \
  --build-arg "BASE_IMAGE=$base" --build-arg "PIP_NO_INDEX=$no_index" -t "$image" "$context" >/dev/null
rm -rf "$context"
# Earlier builds of this image the new one untagged (~1 GB each); the build stages' layers stay,
# the cache of the next build.
engine image prune -f --filter label=org.opencontainers.image.title=spark-consumer-offsets >/dev/null
size=$(engine image inspect --format '{{.Size}}' "$image")
echo "build: $image built in $(($(date +%s) - t0)) s, $((size / 1000000)) MB"
