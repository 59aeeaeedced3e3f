# nasforge: while storage waits for the wizard, say how to start it.
if [ -e /etc/systemd/system/multi-user.target.wants/nasforge-wizard.service ]; then
	case $- in
	*i*) echo "nasforge: storage is not set up yet; run 'sudo nasforge-setup' to choose disks and shares." ;;
	esac
fi
