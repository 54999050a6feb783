"""The test suite (a package, so test modules import as tests.<area>.<module>): a folder per
package of policy_extender, tests/served for the tests through a real gunicorn, and the helpers
more than one module uses in tests/support."""
