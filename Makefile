# Build and test entry points. `make test` is what CI runs (.ci/run): it installs what it needs.
PYTHON  := .venv/bin/python
TCNATIVE := app/target/tcnative/lib/libtcnative-1.so
JAR     := app/target/camel-tuning-lab-service.jar

.PHONY: test check lint test-fast deps test-mock test-app test-integration test-vagrant bench-mock clean

test: deps lint test-mock test-app test-integration test-vagrant

# The edit-test loop: lint and the tests that need no lab, no jar and no VM (well under two minutes).
check:
	tools/install-deps --with-tests
	$(MAKE) --no-print-directory lint test-fast

lint:
	$(PYTHON) -m ruff check lab tests mock-service tools

test-fast:
	$(PYTHON) -m pytest -m fast -q

deps:
	tools/install-deps --with-tests --with-vagrant

# The Tomcat Native library the service's Tomcat requires, built from that Tomcat's own source.
$(TCNATIVE): app/pom.xml app/native/build-tcnative
	app/native/build-tcnative

test-mock: deps
	$(PYTHON) -m pytest mock-service/tests

# Unit and Spring integration tests (APR loaded for real), then the jar.
test-app: deps $(TCNATIVE)
	./mvnw -B -ntp -f app/pom.xml package

# The jar as a process, behind a real HTTPD, with the real mock backend.
test-integration: deps $(TCNATIVE)
	test -f $(JAR) || ./mvnw -B -ntp -q -f app/pom.xml package -DskipTests
	$(PYTHON) -m pytest tests --durations=20

# Both VMs of the Vagrantfile booted under emulation, provisioned, checked and loaded (~40 min).
test-vagrant: deps
	tools/install-deps --with-tests --with-vm-test
	tests/vagrant/run

bench-mock: deps
	$(PYTHON) mock-service/bench.py

clean:
	rm -rf app/target .venv
