// etcd's own main (go.etcd.io/etcd/v3's main.go), which lives in a module that is not served:
// the server module's etcdmain is the whole command.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
