"""A Docker engine of the real-container test's own, and the stand-in images it builds.

`DockerEngine` starts Debian's `dockerd` on a socket of its own (no system engine is used or
needed), and on `stop()` ends it and puts the host back as it found it: the packet-filter
rules dockerd adds (its chains, the FORWARD policy DROP), `net.ipv4.ip_forward`, and the
`docker0` bridge. Its images live in a data folder under the user's cache directory
(`$XDG_CACHE_HOME/tokokita-etl/containers/docker`), so a second run reuses the built layers;
from an empty cache everything is built.

`build_standins()` builds the images docker-compose.yaml names (apache/airflow, postgres,
redis, motoserver/moto) from tests/containers/images/, on a Debian bookworm base made with
`debootstrap --variant=minbase` (its root file system is kept in the same cache as a tar).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from stack import REPO

IMAGES_DIR = Path(__file__).resolve().parent / "images"
BASE_IMAGE = "tokokita-standin/debian:bookworm-minbase"
#: stand-in folder -> the image name docker-compose.yaml uses
STANDINS = {
    "postgres": "postgres:16",
    "redis": "redis:7.2-bookworm",
    "moto": "motoserver/moto:5.2.5",
    "airflow": "apache/airflow:3.3.2-python3.11",
}
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEBIAN_MIRROR = os.environ.get("TOKOKITA_DEBIAN_MIRROR", "http://deb.debian.org/debian")
#: figures of the run (build and stack timings, image sizes), printed after the tests
CONTAINER_REPORT: dict[str, object] = {}
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
#: Debian's programs (the docker CLI of the docker.io package, not another one on PATH)
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class EngineUnavailable(RuntimeError):
    """No Docker engine can start here (the test is skipped with this reason)."""


def cache_dir() -> Path:
    """The test's cache: the base root file system and the engine's images."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tokokita-etl" / "containers"


def run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 600,
        check: bool = True, input_text: str | None = None) -> subprocess.CompletedProcess:
    """Run a command; on failure raise with its output (the last 4000 characters)."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False, input=input_text)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n"
                           f"{(done.stdout + done.stderr)[-4000:]}")
    return done


@dataclass
class HostNetworkState:
    """What dockerd changes on the host's network: recorded before, put back after."""

    ip_forward: str
    nft_ruleset: str | None  # `nft list ruleset` (None: no nft binary, iptables-save used)
    iptables: dict[str, str] = field(default_factory=dict)  # iptables-save / ip6tables-save
    had_docker0: bool = False

    @classmethod
    def record(cls) -> HostNetworkState:
        nft = shutil.which("nft")
        state = cls(ip_forward=IP_FORWARD.read_text().strip(),
                    nft_ruleset=run([nft, "list", "ruleset"]).stdout if nft else None,
                    had_docker0=Path("/sys/class/net/docker0").exists())
        if nft is None:
            for tool in ("iptables-save", "ip6tables-save"):
                if shutil.which(tool):
                    state.iptables[tool] = run([tool]).stdout
        return state

    def restore(self) -> list[str]:
        """Put the recorded state back; return what still differs (empty: all restored)."""
        if not self.had_docker0 and Path("/sys/class/net/docker0").exists():
            run(["ip", "link", "delete", "docker0"], check=False)
        if self.nft_ruleset is not None:
            run(["nft", "flush", "ruleset"])
            if self.nft_ruleset.strip():
                run(["nft", "-f", "-"], input_text=self.nft_ruleset)
        else:
            for tool, saved in self.iptables.items():
                _restore_iptables(tool, saved)
        IP_FORWARD.write_text(self.ip_forward + "\n")
        now = HostNetworkState.record()
        differs = []
        if now.ip_forward != self.ip_forward:
            differs.append(f"ip_forward is {now.ip_forward}, was {self.ip_forward}")
        if now.nft_ruleset != self.nft_ruleset or now.iptables != self.iptables:
            differs.append("the packet-filter rules differ from before the engine started")
        if now.had_docker0 != self.had_docker0:
            differs.append("the docker0 bridge is still there")
        return differs


def _restore_iptables(tool: str, saved: str) -> None:
    """Without nft: restore the saved tables; empty the tables dockerd added."""
    binary = tool.replace("-save", "")
    saved_tables = {line[1:].strip() for line in saved.splitlines() if line.startswith("*")}
    current = run([tool]).stdout
    for line in current.splitlines():
        if line.startswith("*") and line[1:].strip() not in saved_tables:
            table = line[1:].strip()
            run([binary, "-t", table, "-F"], check=False)
            run([binary, "-t", table, "-X"], check=False)
            for chain in ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING"):
                run([binary, "-t", table, "-P", chain, "ACCEPT"], check=False)
    if saved.strip():
        run([f"{binary}-restore"], input_text=saved)


class DockerEngine:
    """Debian's dockerd on a socket of its own, for the length of the test."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.socket = workdir / "docker.sock"
        self.data_root = cache_dir() / "docker"
        self.proc: subprocess.Popen | None = None
        self.host_state: HostNetworkState | None = None
        self.log_path = workdir / "dockerd.log"

    @property
    def env(self) -> dict[str, str]:
        """The environment of docker and docker-compose commands talking to this engine."""
        return {"PATH": SYSTEM_PATH, "HOME": str(self.workdir),
                "DOCKER_HOST": f"unix://{self.socket}", "DOCKER_BUILDKIT": "0",
                "COMPOSE_DOCKER_CLI_BUILD": "0", "DOCKER_CONFIG": str(self.workdir / "cli")}

    def docker(self, *args: str, timeout: float = 600, check: bool = True) -> \
            subprocess.CompletedProcess:
        """`docker ...` against this engine."""
        return run(["/usr/bin/docker", *args], env=self.env, timeout=timeout, check=check)

    def start(self, timeout: float = 90) -> None:
        """Start dockerd; EngineUnavailable when it cannot run here."""
        missing = [tool for tool in ("dockerd", "docker", "containerd", "runc")
                   if not shutil.which(tool, path=SYSTEM_PATH)]
        if missing:
            raise EngineUnavailable(f"{', '.join(missing)} missing: apt-get install docker.io "
                                    "docker-compose containerd runc debootstrap (.ci/run does)")
        if os.geteuid() != 0:
            raise EngineUnavailable("starting dockerd needs root")
        if Path("/sys/class/net/docker0").exists():
            raise EngineUnavailable("a docker0 bridge exists: another Docker engine runs here, "
                                    "or one stopped without removing it (ip link delete docker0)")
        self.data_root.mkdir(parents=True, exist_ok=True)
        self.host_state = HostNetworkState.record()
        log = open(self.log_path, "w")  # noqa: SIM115 (dockerd writes it until stop())
        self.proc = subprocess.Popen(
            [shutil.which("dockerd", path=SYSTEM_PATH), "--host", f"unix://{self.socket}",
             "--data-root", str(self.data_root), "--exec-root", str(self.workdir / "exec"),
             "--pidfile", str(self.workdir / "dockerd.pid"), "--storage-driver", "overlay2"],
            stdout=log, stderr=subprocess.STDOUT, env={"PATH": SYSTEM_PATH},
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise EngineUnavailable(f"dockerd exited {self.proc.returncode}: {tail}")
            if self.socket.exists() and self.docker("info", check=False, timeout=30).returncode == 0:
                return
            time.sleep(0.5)
        tail = self.log_tail()
        self.stop()
        raise EngineUnavailable(f"dockerd did not answer within {timeout:.0f}s: {tail}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self) -> list[str]:
        """End dockerd (and the containerd it started); restore the host's network state."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        differs = self.host_state.restore() if self.host_state else []
        self.host_state = None
        return differs

    # -- images ---------------------------------------------------------------------------

    def has_image(self, name: str) -> bool:
        return self.docker("image", "inspect", name, check=False, timeout=60).returncode == 0

    def image_size(self, name: str) -> int:
        return int(self.docker("image", "inspect", "--format", "{{.Size}}", name).stdout)

    def ensure_base(self) -> None:
        """The bookworm minbase image, imported from the cached root file system."""
        if self.has_image(BASE_IMAGE):
            return
        rootfs_tar = cache_dir() / "bookworm-minbase.tar"
        if not rootfs_tar.exists():
            if not shutil.which("debootstrap"):
                raise EngineUnavailable("debootstrap is missing: apt-get install debootstrap")
            with tempfile.TemporaryDirectory(dir=self.workdir) as tmp:
                rootfs = Path(tmp) / "rootfs"
                run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), DEBIAN_MIRROR],
                    timeout=1200)
                part = rootfs_tar.with_name(f".{rootfs_tar.name}.part")
                # without the downloaded packages debootstrap leaves in apt's cache
                run(["tar", "-C", str(rootfs), "--exclude=./var/cache/apt/archives/*.deb",
                     "-cf", str(part), "."], timeout=600)
                os.replace(part, rootfs_tar)
        with open(rootfs_tar, "rb") as tar:
            done = subprocess.run(["/usr/bin/docker", "import", "-", BASE_IMAGE], stdin=tar,
                                  env=self.env, capture_output=True, text=True, timeout=600,
                                  check=False)
        if done.returncode != 0:
            raise RuntimeError(f"docker import of {rootfs_tar} failed: {done.stderr[-2000:]}")

    def build_standins(self, names: tuple[str, ...] = tuple(STANDINS)) -> dict[str, float]:
        """Build the stand-in images (cached layers are reused); seconds per image."""
        self.ensure_base()
        took = {}
        for folder in names:
            started = time.monotonic()
            with tempfile.TemporaryDirectory(dir=self.workdir) as tmp:
                context = Path(tmp)
                shutil.copytree(IMAGES_DIR / folder, context, dirs_exist_ok=True)
                shutil.copy(REPO / "constraints.txt", context / "constraints.txt")
                shutil.copy(HOST_CA_BUNDLE, context / "build-host-ca.crt")
                self.docker("build", "--build-arg", f"STANDIN_BASE={BASE_IMAGE}",
                            "-t", STANDINS[folder], str(context), timeout=1800)
            took[folder] = time.monotonic() - started
        # a changed stand-in or lock leaves the previous images untagged in the cache
        self.docker("image", "prune", "-f", timeout=300)
        return took


@contextlib.contextmanager
def running_engine(workdir: Path):
    """A started engine; stopped and the host restored on leaving, also on failure."""
    engine = DockerEngine(workdir)
    engine.start()
    try:
        yield engine
    finally:
        differs = engine.stop()
        if differs:
            raise RuntimeError("the host was not restored after the Docker engine stopped: "
                               + "; ".join(differs))
