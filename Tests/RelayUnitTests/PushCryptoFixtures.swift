/// Keys and signatures made with Python's `cryptography` (OpenSSL underneath, but a separate
/// encoder and signer), so the tests compare against an implementation other than ours.
enum PushCryptoFixtures {
    /// A P-256 key as PKCS#8, the form of Apple's .p8 files.
    static let p256PKCS8 = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgt3asC7fDVXASaEri
        NHyqgX+Tv8Dbf8YwAd1tbrr1JQOhRANCAARF19mwMbQVj5qUF0CNse98ue5x5q8g
        8pCGbFLfRz1zlxOip/iOa1X74C2Bn/IUV/Mmj3y218+0Y5F0YKhE/RTP
        -----END PRIVATE KEY-----
        """

    /// The same key as SEC1 ("EC PRIVATE KEY"), as `openssl ecparam -genkey` writes it.
    static let p256SEC1 = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEILd2rAu3w1VwEmhK4jR8qoF/k7/A23/GMAHdbW669SUDoAoGCCqGSM49
        AwEHoUQDQgAERdfZsDG0FY+alBdAjbHvfLnuceavIPKQhmxS30c9c5cToqf4jmtV
        ++AtgZ/yFFfzJo98ttfPtGORdGCoRP0Uzw==
        -----END EC PRIVATE KEY-----
        """

    /// The same key as SEC1 asking for compressed points (`openssl ec -conv_form compressed`).
    static let p256SEC1Compressed = """
        -----BEGIN EC PRIVATE KEY-----
        MFcCAQEEILd2rAu3w1VwEmhK4jR8qoF/k7/A23/GMAHdbW669SUDoAoGCCqGSM49
        AwEHoSQDIgADRdfZsDG0FY+alBdAjbHvfLnuceavIPKQhmxS30c9c5c=
        -----END EC PRIVATE KEY-----
        """

    /// A P-256 key encrypted with a passphrase: must be refused, not prompted for on a terminal.
    static let p256Encrypted = """
        -----BEGIN ENCRYPTED PRIVATE KEY-----
        MIH0MF8GCSqGSIb3DQEFDTBSMDEGCSqGSIb3DQEFDDAkBBCDF75xuU1hA4CsmK6w
        Az7SAgIIADAMBggqhkiG9w0CCQUAMB0GCWCGSAFlAwQBKgQQ+BA6KHvUSjZ5jfDW
        xGCEdQSBkMJ/rwxXLeBrax/GTEFDN461eNjN5nG/DCkhkMHIJ0+iJ2sDE92bdWd/
        ZBCIfhFaspIv6pAWUt8gOoy8JRqglL4YQH/a/SPD2NtfbnOEsy0n6U7QZpkdcQui
        DKzeakhe6vZKPPYyiR/OHIfaJL/guRMMXH41NgEtATihZDY5YUkEIT8LfAD14yBn
        pNgC0guttg==
        -----END ENCRYPTED PRIVATE KEY-----
        """

    /// Its private scalar and uncompressed public point, base64url.
    static let p256Scalar = "t3asC7fDVXASaEriNHyqgX-Tv8Dbf8YwAd1tbrr1JQM"
    static let p256Public = "BEXX2bAxtBWPmpQXQI2x73y57nHmryDykIZsUt9HPXOXE6Kn-I5rVfvgLYGf8hRX8yaPfLbXz7RjkXRgqET9FM8"

    /// The message both signatures below cover.
    static let signedMessage = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0ZXN0In0"

    /// ES256 of `signedMessage` by the P-256 key, r ‖ s base64url (ECDSA is randomized, so this
    /// checks verification only).
    static let es256Signature = "3FnFaQK-KXHE-XS4ljL0_IIpWf1zI4dNIIkgwJ7iESvGnsBk6K3R3I0kaNN4Tma4uPAg6iKpOFXBShvHTjPHRA"

    /// A 2048-bit RSA key as PKCS#8, the form of a service account's `private_key`.
    static let rsaPKCS8 = """
        -----BEGIN PRIVATE KEY-----
        MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCoaIt7wUZpcufJ
        0RVf7dX00Swfsmsz8IOxQ2/REpqAIuQDFuEksSNpl3JG6Fwm5wfUg66p1kpq5Ry5
        5NnOySL+ch/AdkmyFbYmv8CGM7Khs91lab+lTaDBklDUW6uyjanC/mqVMXcrzjFZ
        8IY5AcnOQRrEpplyqtiMr5pujlO7503u5Qjw/QKBqbPP5fSwXrTdlxM1sGqkqbX8
        jO/SMQscWtc4lRAIpfVTW66oP0emEUmLO3GxP/73JFPnUVJp48C392iV1/NakYnr
        /ityKNiR23vvknPz3ZsiuODIJPfWx4xa8B+18veb03HSotolbNAsfnvNvlYNZ6nR
        kXNw5L6rAgMBAAECggEABWEXGzqQhcZ9EG13ueJ5DJf464mbIXtKJ/zMSnNw6Eaw
        xANL+jcG8x1lMday86WyAYAAwsHVT22ozfDBuLQtCK1KVvNuLlP04OaUoUw8C8ZM
        HlbssIDdHD1/tv6mN1MFBMqWW9RcBvYlWq1VghmmbFMhDJffdYDmijRpm3Fuuq2U
        TD99EU+pE6HcTpS7p6p+eK0K0oc93FCLFVXmOJvF336wjyXQ2MXM8zm3+yrsBSMT
        KJUNWs01Z80V5cQxxuDBA8jK6tn+SH4OwwwGeHWlMUYlgX/rH08gd3Wcg2Lkv4fh
        ELhsl9+wrsHjGP8N6XJx8bN1rZIQDGmo3IN101fEkQKBgQDohsAIB7cx7YI1gSyW
        pFvP0DjYC+WNhcznR1BZy2V7iigRjVDg6Xo/v6U96OVUUZDBC3iIDAyzYKjZ81J6
        04PQNyzJK5uAS1o6YZcfyJvkPh7xIEaPCvDLw/BH7x+9zuoQH2NiUfc6ssm26TjQ
        mj6fJNXOVg42+WwmT2BuirV/MQKBgQC5aMYi658QcrpCG1DyYcrgdS7w/Tra7Lbu
        GkecGXDyBwgXDJOOQvON9az5auN+JMKhzmv3pjMR+KNnkguf2bukb/zgP5A7Gtle
        RJq8X+3w7uYP/9rykxZHH5cgInBl+Z53EWKVnAod1RZ/rQ+xFQ1zgoUpq7fELp/n
        kgRyinV8mwKBgAl9rorlXbng+uaaLiq77K9vzVIsMiNzqahrBcGUhsDjI72Lqhh0
        DzRY6zK6tdmaNrFaeYH8E+yibmHvB5fR2FiAWAiiCgfTi4xEfXmjo5FOY87txVOD
        W87FYaJeBUqnDnC4B0N1GwU/VPJtVI9XLGUsiLmSU6Q0zBBIPyRj7wKRAoGAe+Nd
        mZHVfHkcqfV0tjDQDgFfN1oNzKElbp4SwWRiiuZV6ojVw9ZKxc2mIhbhIbXQc6vp
        itX8BAMetKLqr4oejrbhwrnWVxgOrKWsuzhiVn5bLc+pbjMITMf4BFnevtT3pNny
        BMP6Iory+Kcb+Bh4H3nUHs8GAMmiwWpZHGwWKwcCgYAiUGl3yfl/4uLoLfmbHN/J
        43a26v4CpvXiJzpzVnjvZLZjE5ra2YQwSrJ3fGH2nA3WXuIMjW7CCgmcvY5/Ze5n
        nlD6WmXdbQiwxglGnZHJvoubLh0dMKq0uQ0ikQ8DVvR2zydGv+k97rym2TD5+1JN
        aMUAKdUeQfmcof2Fel5gig==
        -----END PRIVATE KEY-----
        """

    /// The same key as PKCS#1 ("RSA PRIVATE KEY").
    static let rsaPKCS1 = """
        -----BEGIN RSA PRIVATE KEY-----
        MIIEogIBAAKCAQEAqGiLe8FGaXLnydEVX+3V9NEsH7JrM/CDsUNv0RKagCLkAxbh
        JLEjaZdyRuhcJucH1IOuqdZKauUcueTZzski/nIfwHZJshW2Jr/AhjOyobPdZWm/
        pU2gwZJQ1Furso2pwv5qlTF3K84xWfCGOQHJzkEaxKaZcqrYjK+abo5Tu+dN7uUI
        8P0Cgamzz+X0sF603ZcTNbBqpKm1/Izv0jELHFrXOJUQCKX1U1uuqD9HphFJiztx
        sT/+9yRT51FSaePAt/doldfzWpGJ6/4rcijYkdt775Jz892bIrjgyCT31seMWvAf
        tfL3m9Nx0qLaJWzQLH57zb5WDWep0ZFzcOS+qwIDAQABAoIBAAVhFxs6kIXGfRBt
        d7nieQyX+OuJmyF7Sif8zEpzcOhGsMQDS/o3BvMdZTHWsvOlsgGAAMLB1U9tqM3w
        wbi0LQitSlbzbi5T9ODmlKFMPAvGTB5W7LCA3Rw9f7b+pjdTBQTKllvUXAb2JVqt
        VYIZpmxTIQyX33WA5oo0aZtxbrqtlEw/fRFPqROh3E6Uu6eqfnitCtKHPdxQixVV
        5jibxd9+sI8l0NjFzPM5t/sq7AUjEyiVDVrNNWfNFeXEMcbgwQPIyurZ/kh+DsMM
        Bnh1pTFGJYF/6x9PIHd1nINi5L+H4RC4bJffsK7B4xj/DelycfGzda2SEAxpqNyD
        ddNXxJECgYEA6IbACAe3Me2CNYEslqRbz9A42AvljYXM50dQWctle4ooEY1Q4Ol6
        P7+lPejlVFGQwQt4iAwMs2Co2fNSetOD0DcsySubgEtaOmGXH8ib5D4e8SBGjwrw
        y8PwR+8fvc7qEB9jYlH3OrLJtuk40Jo+nyTVzlYONvlsJk9gboq1fzECgYEAuWjG
        IuufEHK6QhtQ8mHK4HUu8P062uy27hpHnBlw8gcIFwyTjkLzjfWs+WrjfiTCoc5r
        96YzEfijZ5ILn9m7pG/84D+QOxrZXkSavF/t8O7mD//a8pMWRx+XICJwZfmedxFi
        lZwKHdUWf60PsRUNc4KFKau3xC6f55IEcop1fJsCgYAJfa6K5V254Prmmi4qu+yv
        b81SLDIjc6moawXBlIbA4yO9i6oYdA80WOsyurXZmjaxWnmB/BPsom5h7weX0dhY
        gFgIogoH04uMRH15o6ORTmPO7cVTg1vOxWGiXgVKpw5wuAdDdRsFP1TybVSPVyxl
        LIi5klOkNMwQSD8kY+8CkQKBgHvjXZmR1Xx5HKn1dLYw0A4BXzdaDcyhJW6eEsFk
        YormVeqI1cPWSsXNpiIW4SG10HOr6YrV/AQDHrSi6q+KHo624cK51lcYDqylrLs4
        YlZ+Wy3PqW4zCEzH+ARZ3r7U96TZ8gTD+iKK8vinG/gYeB951B7PBgDJosFqWRxs
        FisHAoGAIlBpd8n5f+Li6C35mxzfyeN2tur+Aqb14ic6c1Z472S2YxOa2tmEMEqy
        d3xh9pwN1l7iDI1uwgoJnL2Of2XuZ55Q+lpl3W0IsMYJRp2Ryb6Lmy4dHTCqtLkN
        IpEPA1b0ds8nRr/pPe68ptkw+ftSTWjFACnVHkH5nKH9hXpeYIo=
        -----END RSA PRIVATE KEY-----
        """

    /// RS256 of `signedMessage` by the RSA key, base64url. PKCS#1 v1.5 is deterministic, so
    /// ours must match byte for byte.
    static let rs256Signature = """
        P2feYu3eLif6o2Wso46s05nkH_oUoK02O8r423qYbeoc4ZgNEOx9_ytNXuEfGaBLRxxgpXy2C2bO58Fxvfr4AuBZPT1eqO1J\
        RQ4lwmgd1HlnkR8Y9Xfbbs_BGRDxs4-sdGJUKYiFqVz8QepKpUMHps704Xg9qFGPLffMVIr34x1DoThdGb2A9e4FztjQwKPh\
        _dqoV31nAe-CEDxGK0yOiq4zFduGF3nyzExyr-GbY346QuF-9I0k0CVtq8c13E1tcLYq7E3bx2YtdqZSsFCDqyb98izvrYJ_\
        3f7ROmPNmtk7vKWhUyW5ZzpZpsB6ztjnUWpUocTa3TpEab-MT-4HDA
        """
}
