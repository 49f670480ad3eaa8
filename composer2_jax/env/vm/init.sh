#!/busybox sh
# /init of the VM's initramfs (see env/vm/assets.py): load the virtio modules, mount the runtime disk (vda) at /usr
# and the image disk (vdb) at /.root, then hand pid 1 to the guest init (env/vm/guest_init.py).
B=/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
$B mount -t cgroup2 cgroup2 /sys/fs/cgroup  # guest_init bounds the guest process's pids in a cgroup
case " $($B cat /proc/cmdline) " in *" vm.probe=1 "*) echo VM-PROBE-OK; $B poweroff -f ;; esac
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk virtio_console \
         failover net_failover virtio_net; do
  [ -f /modules/$m.ko ] && $B insmod /modules/$m.ko 2>/dev/null
done
i=0
while [ ! -b /dev/vdb ] && [ $i -lt 200 ]; do $B usleep 20000; i=$((i + 1)); done
$B mount -o ro /dev/vda /usr || { echo "vm-init: no runtime disk"; $B poweroff -f; }
$B mount -o rw,noatime /dev/vdb /.root || { echo "vm-init: no image disk"; $B poweroff -f; }
$B mount -t tmpfs -o size=64m,mode=1777 tmpfs /tmp
$B mkdir -p /.root/proc /.root/dev /.root/etc /.root/tmp
$B mount --bind /proc /.root/proc
$B mount --bind /dev /.root/dev
$B mkdir -p /dev/pts /dev/shm
$B mount -t devpts devpts /dev/pts
$B mount -t tmpfs -o mode=1777 tmpfs /dev/shm
$B ip link set lo up 2>/dev/null || $B ifconfig lo 127.0.0.1 up
case " $($B cat /proc/cmdline) " in
  *" vm.egress="*) $B ip link set eth0 up && $B ip addr add 10.0.2.15/24 dev eth0 ;;
esac
exec /usr/bin/python3 -I -S /guest_init.py
