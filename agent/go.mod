module sandboxd/agent

go 1.19
