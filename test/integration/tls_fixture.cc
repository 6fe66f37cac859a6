#include "tls_fixture.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>

namespace kgpu::testing {

namespace {

std::string quote(const std::string& s) { return "'" + s + "'"; }

bool openssl(const std::string& args) {
  auto out = run_command("openssl " + args);
  EXPECT_EQ(out.status, 0) << "openssl " << args << "\n" << out.text;
  return out.status == 0;
}

size_t append(char* data, size_t size, size_t n, void* to) {
  static_cast<std::string*>(to)->append(data, size * n);
  return size * n;
}

}  // namespace

TestCa::TestCa(const TempDir& dir, const std::string& name) : dir_(dir), name_(name) {
  const std::string base = (dir.path() / name).string();
  if (openssl("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + name + " -keyout " + quote(base + ".key") +
              " -out " + quote(base + ".crt") +
              " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign")) {
    ca_ = {base + ".crt", base + ".key"};
  }
}

CertFiles TestCa::sign(const std::string& name, const std::string& extensions) const {
  static std::atomic<int> serial{1000};
  const std::string base = (dir_.path() / name).string();
  dir_.write(name + ".ext", extensions);
  if (ca_.cert.empty() ||
      !openssl("req -newkey rsa:2048 -nodes -subj /CN=" + name + " -keyout " + quote(base + ".key") + " -out " +
               quote(base + ".csr")) ||
      !openssl("x509 -req -days 2 -in " + quote(base + ".csr") + " -CA " + quote(ca_.cert) + " -CAkey " +
               quote(ca_.key) + " -set_serial " + std::to_string(serial++) + " -extfile " + quote(base + ".ext") +
               " -out " + quote(base + ".crt"))) {
    return {};
  }
  return {base + ".crt", base + ".key"};
}

CertFiles TestCa::server(const std::string& name) const {
  return sign(name,
              "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n");
}

CertFiles TestCa::client(const std::string& name, const std::string& sans) const {
  return sign(name, "subjectAltName=" + sans + "\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
}

HttpsResult https_get(int port, const std::string& path, const HttpsOptions& o) {
  HttpsResult r;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return r;
  char error[CURL_ERROR_SIZE] = {};
  const std::string url = std::string(o.plain_http ? "http" : "https") + "://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &append);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
  if (o.ca.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CAINFO, o.ca.c_str());
  }
  if (!o.client.cert.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, o.client.cert.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, o.client.key.c_str());
  }
  if (o.userpwd) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERPWD, o.userpwd->c_str());
  }
  if (o.min_tls != 0 || o.max_tls != 0) curl_easy_setopt(curl, CURLOPT_SSLVERSION, o.min_tls | o.max_tls);
  if (!o.ciphers.empty()) curl_easy_setopt(curl, CURLOPT_SSL_CIPHER_LIST, o.ciphers.c_str());
  r.curl_code = curl_easy_perform(curl);
  if (r.curl_code != CURLE_OK)
    r.error = error[0] != '\0' ? error : curl_easy_strerror(static_cast<CURLcode>(r.curl_code));
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_cleanup(curl);
  return r;
}

}  // namespace kgpu::testing
