module example.com/gompi-ringbarrier

go 1.26.0

require github.com/gompi/gompi v0.0.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/gompi/gompi => ../../..
