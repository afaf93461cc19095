#!/usr/bin/env bash
# The one install script: everything this project needs on a fresh machine, idempotent.
#
#   bash deploy/setup.sh              # .venv + Python deps + JVM jars + the driver's class archive
#   bash deploy/setup.sh --postgres   # ... and PostgreSQL's server binaries (apt), for its tests
#   bash deploy/setup.sh --test-tools # ... and Prometheus, Chromium (the server's tests), podman,
#                                     # runc and debootstrap (the image's), from apt
#   bash deploy/setup.sh --python 3.13 # .venv-3.13 instead of .venv, from that Python (CI's others)
#   bash deploy/setup.sh --python 3.13 --venv-only  # only that virtualenv: no apt, no jars (for
#                                     # installs running beside a full setup, which owns those)
#
# Python packages come from requirements.lock (exact versions with hashes: the tested set), then
# the project itself with --no-deps. Phases that are already done are skipped: the virtualenv's
# install is keyed by a hash of pyproject.toml and requirements.lock, the Maven-resolved jars by a
# hash of deploy/pom.xml (stamp files). Output is kept short (pip -q, mvn -q); any failure stops
# the script with the tool's own error. A Python X.Y is pythonX.Y on PATH, else pyenv's newest X.Y
# ($PYENV_ROOT, `pyenv root`, ~/.pyenv); none is an error, never a fallback to another version.
# Environment: PYTHON (interpreter for a new .venv, default Python 3.11), MVN_ARGS (extra Maven
# arguments, e.g. -Dmaven.repo.local=...).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

with_postgres=false
with_test_tools=false
python_version=""
venv_only=false
while [ $# -gt 0 ]; do
  case "$1" in
    --postgres) with_postgres=true ;;
    --venv-only) venv_only=true ;;
    --test-tools) with_test_tools=true ;;
    --python)
      python_version="${2:-}"
      [[ "$python_version" =~ ^3\.[0-9]+$ ]] || {
        echo "setup: --python takes a version like 3.13, not '${python_version}'" >&2
        exit 2
      }
      shift
      ;;
    -h | --help)
      sed -n '2,17p' "$0"
      exit 0
      ;;
    *)
      echo "setup: unknown argument: $1" >&2
      exit 2
      ;;
  esac
  shift
done

venv=.venv${python_version:+-$python_version}
lock=requirements.lock
jars=.runtime/jars
setup_t0=$(date +%s%N)
phase_name=""
phase_t0=0

phase() {
  phase_name="$1"
  phase_t0=$(date +%s%N)
  echo "==> setup: $phase_name"
}

phase_done() {
  local ms=$((($(date +%s%N) - phase_t0) / 1000000))
  printf '    %s: %d.%01d s%s\n' "$phase_name" $((ms / 1000)) $((ms % 1000 / 100)) "${1:+ ($1)}"
}

# ticking COMMAND...: run COMMAND, saying every $SETUP_TICK_S (30) s that the phase still runs
# and for how long: the long steps (pip, Maven, the class archive) are otherwise silent.
ticking() {
  (
    while sleep "${SETUP_TICK_S:-30}"; do
      printf '    ... %s: %d s so far\n' "$phase_name" $((($(date +%s%N) - phase_t0) / 1000000000))
    done
  ) &
  local ticker=$! status=0
  "$@" || status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$status"
}

hash_of() {
  sha256sum "$@" | sha256sum | cut -c1-16
}

# find_python X.Y: the path of a working Python X.Y, or nothing. pyenv's shims are on PATH too,
# but answer "command not found" for a version that is not pyenv's global one, so each candidate
# is run before it is taken.
find_python() {
  local version="$1" candidate root roots=()
  if candidate=$(command -v "python$version") && python_is "$candidate" "$version"; then
    echo "$candidate"
    return
  fi
  [ -n "${PYENV_ROOT:-}" ] && roots+=("$PYENV_ROOT")
  command -v pyenv >/dev/null && roots+=("$(pyenv root 2>/dev/null || true)")
  roots+=("$HOME/.pyenv")
  for root in "${roots[@]}"; do
    [ -d "$root/versions" ] || continue
    # Newest patch release first (3.12.10 before 3.12.9).
    while read -r candidate; do
      if python_is "$candidate" "$version"; then
        echo "$candidate"
        return
      fi
    done < <(compgen -G "$root/versions/$version.*/bin/python$version" | sort -rV)
  done
  return 0
}

python_is() {  # path, X.Y: does it run, and is it that version?
  [ -x "$1" ] && [ "$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$2" ]
}

# Maven 3.8 prints bare ANSI reset codes even with -q -B; strip them and keep real messages
# (pipefail keeps mvn's exit status).
mvn_quiet() {
  mvn -q -B "$@" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d'
}

apt_updated=false
apt_install() {
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || {
      echo "setup: need root (or sudo) to apt-get install $*" >&2
      exit 1
    }
    sudo=(sudo)
  fi
  if ! $apt_updated; then
    "${sudo[@]}" apt-get update -qq
    apt_updated=true
  fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# -- JVM toolchain: Java runs Spark and the broker, Maven resolves their jars ----------------------
if $venv_only; then
  phase "java, maven and openssl"
  phase_done "skipped (--venv-only)"
else
  phase "java, maven and openssl"
  missing=()
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || missing+=(maven)
  # openssl makes the certificates of the tests' SASL_SSL broker.
  command -v openssl >/dev/null || missing+=(openssl)
  if [ ${#missing[@]} -gt 0 ]; then
    apt_install "${missing[@]}"
    phase_done "installed ${missing[*]}"
  else
    phase_done "present"
  fi
fi

# -- Python virtualenv ----------------------------------------------------------------------------
phase "virtualenv $venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null ||
  { [ -n "$python_version" ] && ! python_is "$venv/bin/python" "$python_version"; }; then
  if [ -n "$python_version" ]; then
    python=$(find_python "$python_version")
  elif [ -n "${PYTHON:-}" ]; then
    python=$(command -v "$PYTHON" || true)
  else
    python=$(find_python 3.11)
  fi
  [ -n "$python" ] || {
    if [ -n "$python_version" ]; then
      echo "setup: no Python $python_version found (PATH, pyenv); install it," \
        "e.g. pyenv install $python_version" >&2
    else
      echo "setup: no ${PYTHON:-Python 3.11} found (PATH, pyenv); install it or set PYTHON" >&2
    fi
    exit 1
  }
  rm -rf "$venv"
  "$python" -m venv "$venv"
  phase_done "created with $("$venv/bin/python" --version)"
else
  phase_done "present"
fi

phase "python packages"
py_stamp="$venv/.consumer-offsets-installed"
py_key=$(hash_of pyproject.toml "$lock")
if [ "$(cat "$py_stamp" 2>/dev/null)" = "$py_key" ]; then
  phase_done "up to date"
else
  echo "    pip install from $lock: pyspark, pandas, pyarrow... (~1 GB; 1-3 min)"
  pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
  # Hash-checked: every package and its dependencies must be in the lock, at its hashes.
  ticking "${pip[@]}" install --require-hashes -r "$lock"
  "${pip[@]}" install --no-deps -e .
  # The lock must satisfy pyproject.toml's ranges (a range moved without regenerating it fails).
  "${pip[@]}" check >/dev/null || {
    "${pip[@]}" check >&2
    echo "setup: $lock does not satisfy pyproject.toml; regenerate it (see its header)" >&2
    exit 1
  }
  echo "$py_key" >"$py_stamp"
  phase_done "installed from $lock"
fi

# Spark puts $SPARK_HOME/python/lib/pyspark.zip and py4j's zip (SPARK_HOME: the pip package) first
# on every Python worker's path. They hold sources only: each worker, and the Python process every
# query start runs for transformWithState's schemas, compiled pyspark again (~1.5 s of CPU each).
# Without them, the workers import the same pyspark from site-packages, compiled at install; the
# project's own modules are compiled here too, for environments that write no bytecode.
phase "python bytecode"
rm -f "$venv"/lib/python3*/site-packages/pyspark/python/lib/{pyspark.zip,py4j-*-src.zip}
"$venv/bin/python" -m compileall -q -j 0 connectors state streaming >/dev/null
phase_done "pyspark's source zips removed; project compiled"

if $venv_only; then
  printf '==> setup: done in %d s (virtualenv only)\n' $((($(date +%s%N) - setup_t0) / 1000000000))
  exit 0
fi

# -- JVM jars (Maven Central, once) ---------------------------------------------------------------
phase "jvm jars"
# Spark's connector only runs next to the exact spark-sql it was built with: the pom's
# spark.version must follow pyspark's whenever pyproject.toml moves it.
pom_spark=$(sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' deploy/pom.xml)
venv_spark=$("$venv/bin/python" -c 'import pyspark; print(pyspark.__version__)')
if [ "$pom_spark" != "$venv_spark" ]; then
  echo "setup: deploy/pom.xml has spark.version $pom_spark but pyspark is $venv_spark" >&2
  exit 1
fi
jar_stamp="$jars/.resolved"
jar_key=$(hash_of deploy/pom.xml)
# The stamp is written last, so its presence with the pom's hash means both sets are complete;
# the two globs catch a folder emptied by hand since.
if [ "$(cat "$jar_stamp" 2>/dev/null)" = "$jar_key" ] &&
  compgen -G "$jars/spark/spark-sql-kafka-0-10_*.jar" >/dev/null &&
  compgen -G "$jars/kafka/kafka_2.13-*.jar" >/dev/null; then
  phase_done "up to date"
else
  rm -rf "$jars/spark" "$jars/kafka" "$jar_stamp"
  mkdir -p "$jars"
  read -r -a mvn_args <<<"${MVN_ARGS:-}"
  echo "    from Maven Central into $jars (~50 MB the first time; about a minute)"
  for profile in spark-connector kafka-broker; do
    ticking mvn_quiet -f deploy/pom.xml -P "$profile" "${mvn_args[@]}" dependency:copy-dependencies
  done
  # A jar pyspark already ships, at whatever version, is a classpath conflict: fail here
  # rather than in a Spark job.
  conflicts=$("$venv/bin/python" -c \
    'from streaming.spark.session import pyspark_jar_conflicts; print(" ".join(pyspark_jar_conflicts()))')
  if [ -n "$conflicts" ]; then
    echo "setup: $jars/spark duplicates jars pyspark ships: $conflicts" >&2
    echo "setup: exclude them in deploy/pom.xml (profile spark-connector)" >&2
    exit 1
  fi
  echo "$jar_key" >"$jar_stamp"
  phase_done "$(find "$jars/spark" -name '*.jar' | wc -l) spark + $(find "$jars/kafka" -name '*.jar' | wc -l) kafka jars"
fi

# -- The driver JVM's class archive (streaming/spark/class_archive.py): a restarted driver answers sooner --
phase "jvm class archive"
if "$venv/bin/python" -c \
  'import sys; from streaming.spark.class_archive import archive_path; sys.exit(not archive_path().is_file())'; then
  phase_done "up to date"
else
  echo "    Spark started once and its classes recorded, for faster starts (1-3 min)"
  archive_classes() { "$venv/bin/python" -m streaming.cli.archive_classes >/dev/null; }
  # the ticker's lines are not the archiver's: only its are dropped. Without the archive every
  # driver still starts, loading its classes itself: a warning, not a failed setup.
  if ticking archive_classes; then
    phase_done "built"
  else
    phase_done "not built: drivers start without it; python -m streaming.cli.archive_classes tries again"
  fi
fi

# -- Prometheus and headless Chromium: the HTTP server's tests scrape it and render its pages; ------
# podman, runc and debootstrap: the image's tests build it and run it (deploy/container/)
if $with_test_tools; then
  phase "prometheus, chromium, podman"
  missing=()
  command -v prometheus >/dev/null || missing+=(prometheus)
  command -v chromium >/dev/null || missing+=(chromium)
  for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt_install "${missing[@]}"
    phase_done "installed ${missing[*]}"
  else
    phase_done "present"
  fi
fi

# -- PostgreSQL server binaries (tests start their own throwaway cluster) -------------------------
if $with_postgres; then
  phase "postgresql"
  if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
    phase_done "present"
  else
    apt_install postgresql
    phase_done "installed"
  fi
fi

total_ms=$((($(date +%s%N) - setup_t0) / 1000000))
printf '==> setup: done in %d.%01d s\n' $((total_ms / 1000)) $((total_ms % 1000 / 100))
