// The package under a real systemd: a Debian 12 VM (qemu with KVM) boots an image built out of
// Debian's packages (tests/vm/build-image.sh, cached in BUILD/vm/image and rebuilt only when its
// recipe changes), installs the .deb that cpack makes of this build tree, and runs
// tests/vm/guest.sh, which prints a line per check on the VM's second serial port. Each check here
// waits for its line, with a deadline. The VM has no network device: the package and the script
// come in as a tar on a second disk.
//
// Without KVM (or qemu, debootstrap) the test says so: it fails in CI (CI=true) and skips
// elsewhere.
#include "toolrun.h"
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>
#include <QTest>

#include <fcntl.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

constexpr int CpackTimeoutMs = 240'000;
constexpr int ImageTimeoutMs = 30 * 60'000;
constexpr int BootTimeoutMs = 180'000;
constexpr int PowerOffTimeoutMs = 60'000;

// The packages a control field names, without versions, of each alternative the first.
QStringList packagesOf(const QString &field)
{
    QStringList names;
    for (const QString &item : field.split(u',', Qt::SkipEmptyParts)) {
        const QString name = item.section(u'|', 0, 0).section(u'(', 0, 0).trimmed();
        if (!name.isEmpty())
            names << name;
    }
    return names;
}

QString tail(const QString &text, int lines)
{
    return text.split(u'\n').mid(std::max<qsizetype>(0, text.count(u'\n') - lines)).join(u'\n');
}

} // namespace

class VmSystemdTest : public QObject
{
    Q_OBJECT

    const QString m_vmDir = QStringLiteral(AGENTDECK_BUILD_DIR) + u"/vm"_s;
    QProcess m_qemu;
    QString m_results; // the guest's lines (second serial port, qemu's stdout)
    QElapsedTimer m_clock;

    // Skipped here, failed in CI: a CI without the means of this test must not pass unnoticed.
    static bool unavailable(const QString &why)
    {
        if (qEnvironmentVariable("CI") == u"true"_s) {
            QTest::qFail(qPrintable(why + u" (required in CI)"_s), __FILE__, __LINE__);
            return true;
        }
        QTest::qSkip(qPrintable(why), __FILE__, __LINE__);
        return true;
    }

    QString consoleTail() const
    {
        QFile console(m_vmDir + u"/console.log"_s);
        return console.open(QIODevice::ReadOnly) ? tail(QString::fromUtf8(console.readAll()), 40)
                                                 : QString();
    }

    // The guest's line for check `name`, once it came ("ok NAME" or "not ok NAME: WHY").
    QString lineOf(const QString &name) const
    {
        for (const QString &line : m_results.split(u'\n')) {
            const QString text = line.trimmed();
            if (text == u"ok "_s + name || text.startsWith(u"not ok "_s + name + u':'))
                return text;
        }
        return {};
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_clock.start();
        const int kvm = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (kvm < 0 && unavailable(u"no KVM: /dev/kvm cannot be opened: "_s +
                                   QString::fromLocal8Bit(std::strerror(errno))))
            return;
        ::close(kvm);
        // A KVM of PVM (kvm_pvm: no hardware virtualization, the guest's kernel runs
        // deprivileged) runs only kernels built for it: Debian's takes minutes to decompress
        // itself there. The guest then runs on qemu's own emulation (TCG), slower but the same
        // machine. AGENTDECK_VM_ACCEL=kvm|tcg chooses.
        QString accel = qEnvironmentVariable("AGENTDECK_VM_ACCEL");
        if (accel.isEmpty())
            accel = QFileInfo::exists(u"/sys/module/kvm_pvm"_s) ? u"tcg"_s : u"kvm"_s;
        if (accel == u"tcg"_s)
            qInfo() << "the guest runs on TCG, not KVM:"
                    << (qEnvironmentVariableIsSet("AGENTDECK_VM_ACCEL")
                            ? "AGENTDECK_VM_ACCEL=tcg"
                            : "this machine's KVM is PVM (kvm_pvm), which boots no stock kernel");
        for (const QString &tool :
             {u"qemu-system-x86_64"_s, u"debootstrap"_s, u"mke2fs"_s, u"dpkg-deb"_s, u"tar"_s})
            if (QStandardPaths::findExecutable(tool).isEmpty() &&
                QStandardPaths::findExecutable(tool, {u"/usr/sbin"_s, u"/sbin"_s}).isEmpty() &&
                unavailable(tool + u" is not installed (packaging/install-deps.sh)"_s))
                return;
        if (::geteuid() != 0 && unavailable(u"building the image needs root (debootstrap)"_s))
            return;

        // The package of this build tree.
        QDir(m_vmDir + u"/package"_s).removeRecursively();
        const ToolResult cpack = runTool(QStringLiteral(AGENTDECK_CPACK),
                                         {u"-G"_s, u"DEB"_s, u"-B"_s, m_vmDir + u"/package"_s},
                                         CpackTimeoutMs, QStringLiteral(AGENTDECK_BUILD_DIR));
        QVERIFY2(cpack.ok(), qPrintable(cpack.output));
        const QStringList debs = QDir(m_vmDir + u"/package"_s).entryList({u"*.deb"_s}, QDir::Files);
        QVERIFY2(debs.size() == 1, qPrintable(cpack.output));
        const QString deb = m_vmDir + u"/package/"_s + debs.constFirst();

        // The image: what the package depends on and recommends is in it already (the VM has no
        // network), and jq for the checks.
        const ToolResult fields =
            runTool(u"dpkg-deb"_s, {u"-f"_s, deb, u"Depends"_s, u"Recommends"_s});
        QVERIFY2(fields.ok(), qPrintable(fields.output));
        QStringList packages{u"jq"_s};
        for (const QString &line : fields.output.split(u'\n'))
            packages << packagesOf(line.section(u':', 1));
        packages.sort();
        packages.removeDuplicates();
        QElapsedTimer imageClock;
        imageClock.start();
        const ToolResult image =
            runTool(QStringLiteral(AGENTDECK_SOURCE_DIR) + u"/tests/vm/build-image.sh"_s,
                    QStringList{m_vmDir + u"/image"_s} + packages, ImageTimeoutMs);
        QVERIFY2(image.ok(), qPrintable(image.output));
        qInfo().noquote() << "image ready in" << imageClock.elapsed() / 1000 << "s"
                          << image.output.trimmed();

        // The payload: the package and the checks, as a tar on the VM's second disk.
        const QString payload = m_vmDir + u"/payload"_s;
        QDir(payload).removeRecursively();
        QVERIFY(QDir().mkpath(payload));
        QVERIFY(QFile::copy(deb, payload + u'/' + debs.constFirst()));
        QVERIFY(QFile::copy(QStringLiteral(AGENTDECK_SOURCE_DIR) + u"/tests/vm/guest.sh"_s,
                            payload + u"/run.sh"_s));
        const ToolResult tar =
            runTool(u"tar"_s, {u"-cf"_s, m_vmDir + u"/payload.tar"_s, u"-C"_s, payload, u"."_s});
        QVERIFY2(tar.ok(), qPrintable(tar.output));

        // No network device; the root disk's changes go to a throwaway overlay (snapshot=on),
        // so the cached image stays as it was built.
        const QString imageDir = m_vmDir + u"/image/"_s;
        QFile::remove(m_vmDir + u"/console.log"_s);
        m_qemu.setProcessChannelMode(QProcess::SeparateChannels);
        connect(&m_qemu, &QProcess::readyReadStandardOutput, this, [this] {
            const QString text = QString::fromUtf8(m_qemu.readAllStandardOutput()).remove(u'\r');
            m_results += text;
            std::fputs(qPrintable(text), stderr);
        });
        m_qemu.start(u"qemu-system-x86_64"_s,
                     {u"-accel"_s,
                      accel == u"tcg"_s ? u"tcg,thread=multi"_s : u"kvm"_s,
                      u"-cpu"_s,
                      u"max"_s,
                      u"-smp"_s,
                      u"2"_s,
                      u"-m"_s,
                      u"2048"_s,
                      u"-nodefaults"_s,
                      u"-no-user-config"_s,
                      u"-display"_s,
                      u"none"_s,
                      u"-no-reboot"_s,
                      u"-nic"_s,
                      u"none"_s,
                      u"-kernel"_s,
                      imageDir + u"vmlinuz"_s,
                      u"-initrd"_s,
                      imageDir + u"initrd.img"_s,
                      u"-append"_s,
                      u"root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=0"_s,
                      u"-drive"_s,
                      u"file=%1rootfs.img,format=raw,if=virtio,snapshot=on"_s.arg(imageDir),
                      u"-drive"_s,
                      u"file=%1/payload.tar,format=raw,if=virtio,readonly=on"_s.arg(m_vmDir),
                      u"-serial"_s,
                      u"file:%1/console.log"_s.arg(m_vmDir),
                      u"-serial"_s,
                      u"stdio"_s});
        QVERIFY2(m_qemu.waitForStarted(), qPrintable(m_qemu.errorString()));
        QTRY_VERIFY2_WITH_TIMEOUT(m_results.contains(u"VMTEST BOOTED"_s) ||
                                      m_qemu.state() == QProcess::NotRunning,
                                  qPrintable(consoleTail()), BootTimeoutMs);
        QVERIFY2(m_results.contains(u"VMTEST BOOTED"_s),
                 qPrintable(QString::fromUtf8(m_qemu.readAllStandardError()) + consoleTail()));
        qInfo() << "booted after" << m_clock.elapsed() / 1000 << "s";
    }

    void cleanupTestCase()
    {
        if (m_qemu.state() != QProcess::NotRunning) {
            // The guest powers off after its last check.
            if (!m_qemu.waitForFinished(PowerOffTimeoutMs)) {
                m_qemu.kill();
                m_qemu.waitForFinished();
            }
        }
        qInfo() << "VM test done after" << m_clock.elapsed() / 1000 << "s";
    }

    void check_data()
    {
        QTest::addColumn<int>("deadlineMs");
        // In the order guest.sh runs them; each deadline counts from the previous line.
        QTest::addRow("install") << 120'000;
        QTest::addRow("start-is-ready") << 60'000;
        QTest::addRow("journal-warning") << 30'000;
        QTest::addRow("delegated-cgroup") << 30'000;
        QTest::addRow("restart-adopts") << 180'000;
        QTest::addRow("sandbox-cgroup") << 30'000;
        QTest::addRow("memory-limit") << 150'000;
        QTest::addRow("pids-limit") << 90'000;
        QTest::addRow("crash-restart") << 120'000;
        QTest::addRow("stop-purge") << 120'000;
    }

    void check()
    {
        QFETCH(int, deadlineMs);
        const QString name = QString::fromUtf8(QTest::currentDataTag());
        QVERIFY2(m_qemu.state() != QProcess::NotRunning || !lineOf(name).isEmpty(),
                 qPrintable(u"the VM is not running: "_s + consoleTail()));
        QTRY_VERIFY2_WITH_TIMEOUT(
            !lineOf(name).isEmpty() || m_qemu.state() == QProcess::NotRunning,
            qPrintable(u"no line for "_s + name + u"; console:\n"_s + consoleTail()), deadlineMs);
        const QString line = lineOf(name);
        QVERIFY2(!line.isEmpty(), qPrintable(u"the VM stopped before "_s + name +
                                             u"; console:\n"_s + consoleTail()));
        QVERIFY2(line.startsWith(u"ok "_s), qPrintable(line));
    }
};

QTEST_GUILESS_MAIN(VmSystemdTest)
#include "tst_vm_systemd.moc"
