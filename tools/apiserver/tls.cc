#include "tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace kgpu::apiserver {

namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;

Key new_key() { return Key(EVP_EC_gen("P-256")); }

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// Issues a certificate for `key` signed by `issuer_key` (self-signed when `issuer` is null).
Cert issue(EVP_PKEY* key, const std::string& cn, const std::string& org, X509* issuer, EVP_PKEY* issuer_key,
           long serial, const std::vector<std::pair<int, std::string>>& exts) {
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!org.empty()) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  for (const auto& [nid, value] : exts) {
    if (!add_ext(cert.get(), issuer != nullptr ? issuer : cert.get(), nid, value)) return nullptr;
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

bool write_pem(const std::string& path, X509* cert, EVP_PKEY* key) {
  std::unique_ptr<BIO, Free> bio(BIO_new_file(path.c_str(), "w"));
  if (!bio) return false;
  if (cert != nullptr) return PEM_write_bio_X509(bio.get(), cert) == 1;
  return PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
}

}  // namespace

std::string generate_certificates(const std::string& dir, const std::vector<std::string>& extra_names,
                                  const std::string& client_cn, CertFiles& out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return dir + ": " + ec.message();
  Key ca_key = new_key(), server_key = new_key(), client_key = new_key();
  if (!ca_key || !server_key || !client_key) return "cannot generate ECDSA keys";
  Cert ca = issue(ca_key.get(), "kgpu-apiserver-ca", "", nullptr, nullptr, 1,
                  {{NID_basic_constraints, "critical,CA:TRUE"},
                   {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
                   {NID_subject_key_identifier, "hash"}});
  std::string san = "DNS:localhost,IP:127.0.0.1,IP:::1";
  for (const auto& n : extra_names) {
    const bool ip = n.find_first_not_of("0123456789.:") == std::string::npos;
    san += (ip ? ",IP:" : ",DNS:") + n;
  }
  Cert server = ca ? issue(server_key.get(), "kgpu-apiserver", "", ca.get(), ca_key.get(), 2,
                           {{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                            {NID_ext_key_usage, "serverAuth"},
                            {NID_subject_alt_name, san}})
                   : nullptr;
  Cert client = ca ? issue(client_key.get(), client_cn, "system:masters", ca.get(), ca_key.get(), 3,
                           {{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                            {NID_ext_key_usage, "clientAuth"}})
                   : nullptr;
  if (!ca || !server || !client) return "cannot issue certificates";
  out = CertFiles{dir + "/ca.crt", dir + "/server.crt", dir + "/server.key", dir + "/client.crt", dir + "/client.key"};
  if (!write_pem(out.ca_cert, ca.get(), nullptr) || !write_pem(out.server_cert, server.get(), nullptr) ||
      !write_pem(out.server_key, nullptr, server_key.get()) || !write_pem(out.client_cert, client.get(), nullptr) ||
      !write_pem(out.client_key, nullptr, client_key.get())) {
    return "cannot write certificates into " + dir;
  }
  std::filesystem::permissions(out.server_key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               ec);
  std::filesystem::permissions(out.client_key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               ec);
  return {};
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kgpu::apiserver
