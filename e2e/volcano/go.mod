module policy-extender/e2e/volcano

// Built per Volcano release with -modfile=releases/RELEASE.mod: use scripts/e2e-volcano.
go 1.22
