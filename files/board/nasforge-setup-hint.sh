# nasforge: while storage waits for its setup wizard, say how to start it,
# and after a login on the board's own console (a person at the keyboard
# who has just given a password) start it, once per login. It runs only
# through sudo: with no more than this account may do. Setup is pending
# while the login screen's note is there; setup removes it on success.
if [ -e /etc/issue.d/nasforge-setup.issue ]; then
	case $- in
	*i*)
		echo "nasforge: storage is not set up yet; run 'sudo nasforge-setup' to choose disks and shares."
		if [ -z "${NASFORGE_SETUP_OFFERED:-}" ]; then
			case "$(tty 2>/dev/null) $(id -Gn 2>/dev/null) " in
			/dev/tty*" sudo "* | /dev/console*" sudo "*)
				# A shell started inside this login inherits it.
				NASFORGE_SETUP_OFFERED=1
				export NASFORGE_SETUP_OFFERED
				sudo /usr/local/sbin/nasforge-setup
				;;
			esac
		fi
		;;
	esac
fi
